#include "tally/runtime/access_review.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace tally::runtime {
namespace {

std::string at(const std::string& body, const char* pointer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc)) return "<not json>";
  simdjson::dom::element e;
  if (doc.at_pointer(pointer).get(e)) return "<none>";
  return simdjson::minify(e);
}

TEST(TokenReview, TheBodyCarriesTheTokenEscaped) {
  const std::string body = tokenReviewBody("a\"b");
  EXPECT_EQ(at(body, "/kind"), R"("TokenReview")");
  EXPECT_EQ(at(body, "/apiVersion"), R"("authentication.k8s.io/v1")");
  EXPECT_EQ(at(body, "/spec/token"), R"("a\"b")");
}

TEST(TokenReview, AnAuthenticatedAnswerNamesTheUserHisGroupsAndExtra) {
  const auto answer = decodeTokenReview(
      R"({"status":{"authenticated":true,"user":{"username":"alice","uid":"u-1","groups":["g1","g2"],)"
      R"("extra":{"scopes":["a","b"]}}}})");
  ASSERT_TRUE(answer.authenticated()) << answer.detail;
  EXPECT_EQ(answer.user.name, "alice");
  EXPECT_EQ(answer.user.uid, "u-1");
  EXPECT_EQ(answer.user.groups, (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(answer.user.extraJson, R"({"scopes":["a","b"]})");
}

TEST(TokenReview, RefusalsAndUnreadableAnswersAuthenticateNobody) {
  auto refused = decodeTokenReview(R"({"status":{"authenticated":false,"error":"token expired"}})");
  EXPECT_EQ(refused.outcome, TokenReviewAnswer::Outcome::Unauthenticated);
  EXPECT_EQ(refused.detail, "token expired");
  for (const char* body : {"", "[]", R"({"status":7})", R"({"status":{"authenticated":true}})",
                           R"({"status":{"authenticated":true,"user":{"groups":["system:masters"]}}})",
                           R"({"status":{"authenticated":"yes","user":{"username":"mallory"}}})"}) {
    const auto answer = decodeTokenReview(body);
    EXPECT_FALSE(answer.authenticated()) << body;
    EXPECT_TRUE(answer.user.name.empty() || answer.outcome != TokenReviewAnswer::Outcome::Authenticated) << body;
  }
  EXPECT_EQ(decodeTokenReview("{").outcome, TokenReviewAnswer::Outcome::Unreadable);
}

TEST(SubjectAccessReview, TheBodyAsksForExactlyThatUserAndResource) {
  ReviewedUser who{"alice", "u-1", {"g1"}, R"({"scopes":["a"]})"};
  auto body = subjectAccessReviewBody(who, {"acme", "get", "gpu.tally.dev", "gpudevices", "d1", ""});
  ASSERT_TRUE(body) << body.error().describe();
  EXPECT_EQ(at(*body, "/kind"), R"("SubjectAccessReview")");
  EXPECT_EQ(at(*body, "/spec/user"), R"("alice")");
  EXPECT_EQ(at(*body, "/spec/uid"), R"("u-1")");
  EXPECT_EQ(at(*body, "/spec/groups"), R"(["g1"])");
  EXPECT_EQ(at(*body, "/spec/extra"), R"({"scopes":["a"]})");
  EXPECT_EQ(at(*body, "/spec/resourceAttributes"),
            R"({"namespace":"acme","name":"d1","verb":"get","group":"gpu.tally.dev","resource":"gpudevices"})");
  EXPECT_EQ(at(*body, "/spec/nonResourceAttributes"), "<none>");

  auto path = subjectAccessReviewBody({"bob", "", {}, ""}, {"", "get", "", "", "", "/usage"});
  ASSERT_TRUE(path);
  EXPECT_EQ(at(*path, "/spec/nonResourceAttributes"), R"({"path":"/usage","verb":"get"})");
  EXPECT_EQ(at(*path, "/spec/resourceAttributes"), "<none>");
  EXPECT_EQ(at(*path, "/spec/extra"), "{}");
  EXPECT_EQ(at(*path, "/spec/uid"), "<none>");
}

TEST(SubjectAccessReview, AnExtraThatIsNoMapOfStringListsIsRefused) {
  for (const char* extra : {"[]", R"({"a":"b"})", R"({"a":[1]})", R"({"a":["b"]} x)", "{"}) {
    EXPECT_FALSE(subjectAccessReviewBody({"alice", "", {}, extra}, {"", "get", "", "", "", "/usage"})) << extra;
  }
}

TEST(SubjectAccessReview, OnlyAnAnswerThatSaysAllowedAllows) {
  EXPECT_EQ(decodeSubjectAccessReview(R"({"status":{"allowed":true}})").outcome, AccessAnswer::Outcome::Allowed);
  const auto denied = decodeSubjectAccessReview(R"({"status":{"allowed":false,"reason":"no RBAC rule"}})");
  EXPECT_EQ(denied.outcome, AccessAnswer::Outcome::Denied);
  EXPECT_EQ(denied.detail, "no RBAC rule");
  EXPECT_EQ(decodeSubjectAccessReview(R"({"status":{"allowed":"true"}})").outcome, AccessAnswer::Outcome::Denied);
  EXPECT_EQ(decodeSubjectAccessReview(R"({"status":{}})").outcome, AccessAnswer::Outcome::Denied);
  EXPECT_EQ(decodeSubjectAccessReview("not json").outcome, AccessAnswer::Outcome::Unreadable);
  EXPECT_EQ(decodeSubjectAccessReview(R"({"spec":{}})").outcome, AccessAnswer::Outcome::Unreadable);
}

}  // namespace
}  // namespace tally::runtime
