#pragma once
// One SubjectAccessReview (authorization.k8s.io/v1) for a user the API server
// has authenticated already (a TokenReview's answer, an AdmissionReview's
// userInfo): may that user do one verb on one resource? GET /options and the
// acknowledgement webhook both ask it this way.

#include <string>
#include <vector>

#include "tally/runtime/client.hpp"

namespace tally::controller::detail {

struct Subject {
  std::string user, uid;
  std::vector<std::string> groups;
  std::string extraJson;  // the user's extra as a JSON object; empty: none
};

// What is asked: ns and name empty for "any" (a cluster-scoped resource has no
// ns); with nonResourcePath, that path and verb (nonResourceAttributes) instead.
struct ResourceAccess {
  std::string ns, verb, group, resource, name;
  std::string nonResourcePath;
};

struct AccessAnswer {
  enum class Outcome { Allowed, Denied, Failed, Unreadable };
  Outcome outcome = Outcome::Failed;
  std::string detail;  // Denied: the authorizer's reason (may be empty); Failed: the client's error
};

AccessAnswer reviewSubjectAccess(runtime::Client& client, const Subject& who, const ResourceAccess& what);

}  // namespace tally::controller::detail
