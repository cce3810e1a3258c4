#pragma once
// Who is calling, and may they? The two reviews the API server answers for a
// component that serves its own endpoints: a TokenReview
// (authentication.k8s.io/v1) turns a bearer token into a user, a
// SubjectAccessReview (authorization.k8s.io/v1) asks whether that user may
// do one verb on one resource or non-resource path. The request bodies and
// the answers' readers are here once, apart from the call, so both are
// tested (and fuzzed) on bytes.

#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/client.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime {

// A user the API server authenticated (a TokenReview's answer, an
// AdmissionReview's userInfo).
struct ReviewedUser {
  std::string name, uid;
  std::vector<std::string> groups;
  std::string extraJson = "{}";  // the user's extra as a JSON object
};

struct TokenReviewAnswer {
  enum class Outcome { Authenticated, Unauthenticated, Failed, Unreadable };
  Outcome outcome = Outcome::Failed;
  ReviewedUser user;  // Authenticated: who
  // Unauthenticated: the authenticator's words (may be empty); Failed: the
  // client's error; Unreadable: what the answer lacks.
  std::string detail;
  bool authenticated() const { return outcome == Outcome::Authenticated; }
};

std::string tokenReviewBody(std::string_view token);
// Authenticated (a user with a name), Unauthenticated or Unreadable; never Failed.
TokenReviewAnswer decodeTokenReview(std::string_view body);

// What is asked: ns and name empty for "any" (a cluster-scoped resource has no
// ns); with nonResourcePath, that path and verb (nonResourceAttributes) instead.
struct AccessAttributes {
  std::string ns, verb, group, resource, name;
  std::string nonResourcePath;
};

struct AccessAnswer {
  enum class Outcome { Allowed, Denied, Failed, Unreadable };
  Outcome outcome = Outcome::Failed;
  std::string detail;  // Denied: the authorizer's reason (may be empty); Failed: the client's error
};

// Refused when the user's extra is not a map of string lists.
Result<std::string> subjectAccessReviewBody(const ReviewedUser& who, const AccessAttributes& what);
// Allowed, Denied (with the reason) or Unreadable; never Failed.
AccessAnswer decodeSubjectAccessReview(std::string_view body);

// The calls: the review created through `client`, its answer read.
TokenReviewAnswer reviewToken(Client& client, std::string_view token);
AccessAnswer reviewSubjectAccess(Client& client, const ReviewedUser& who, const AccessAttributes& what);

}  // namespace tally::runtime
