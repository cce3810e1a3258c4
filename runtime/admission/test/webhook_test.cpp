// The webhook route: decisions answered as AdmissionReviews, malformed reviews
// and handler failures answered with an error, all of it counted.

#include "tally/runtime/admission/webhook.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tally::runtime::admission {
namespace {

const char* const kReview =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r-1",)"
    R"("kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},)"
    R"("operation":"CREATE","dryRun":true,"object":{"metadata":{"name":"x"}}}})";

struct Fixture : ::testing::Test {
  observability::Registry registry;
  WebhookOptions options{{}, std::make_shared<WebhookMetrics>(registry)};
  std::uint64_t count(const std::string& result) {
    return options.metrics->requests("check", Operation::kCreate, result).value();
  }
};

TEST_F(Fixture, RoutedPostReachesTheHandlerWithDryRun) {
  http::Router router;
  bool sawDryRun = false;
  addWebhook(
      router, "/validate", "check",
      [&](const AdmissionRequest& r) {
        sawDryRun = r.dryRun;
        return AdmissionResponse::refuse(403, "not " + r.name);
      },
      options);
  auto match = router.match("POST", "/validate");
  ASSERT_NE(match.handler, nullptr);
  EXPECT_EQ(match.label, "check");
  EXPECT_EQ(match.caller, http::Caller::VerifiedClient) << "reviews are only for the API server's certificate";
  EXPECT_EQ(router.match("GET", "/validate").status, 405);
  http::Request request("POST", "/validate", kReview);
  http::Response response;
  (*match.handler)(request, [&](http::Response r) { response = std::move(r); });
  EXPECT_TRUE(sawDryRun);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.contentType, "application/json");
  EXPECT_NE(response.body.find(R"("uid":"r-1","allowed":false,"status":{"code":403,"message":"not "})"),
            std::string::npos)
      << response.body;
  EXPECT_EQ(count("refused"), 1u);
  EXPECT_EQ(options.metrics->duration("check").count(), 1u);
}

TEST_F(Fixture, MalformedReviewIs400WithTheDecodersMessageAndCounted) {
  int calls = 0;
  auto handler = [&](const AdmissionRequest&) {
    ++calls;
    return AdmissionResponse::allow();
  };
  auto r = answerReview("check", handler, R"({"apiVersion":"v1","kind":"AdmissionReview"})", options);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("webhook check: AdmissionReview: apiVersion is \"v1\""), std::string::npos) << r.body;
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(options.metrics->malformed("check").value(), 1u);
  EXPECT_NE(registry.render().find("tally_webhook_malformed_reviews_total{webhook=\"check\"} 1"), std::string::npos);
}

TEST_F(Fixture, OversizedReviewIs413) {
  WebhookOptions small = options;
  small.decode.maxBodyBytes = 10;
  auto r = answerReview(
      "check", [](const AdmissionRequest&) { return AdmissionResponse::allow(); }, kReview, small);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(options.metrics->malformed("check").value(), 1u);
}

TEST_F(Fixture, HandlerExceptionIs500AndTheNextReviewIsServed) {
  bool fail = true;
  auto handler = [&](const AdmissionRequest&) {
    if (fail) throw std::runtime_error("snapshot missing");
    return AdmissionResponse::allow();
  };
  auto broken = answerReview("check", handler, kReview, options);
  EXPECT_EQ(broken.status, 500);
  EXPECT_NE(broken.body.find("webhook check failed on request r-1: snapshot missing"), std::string::npos);
  EXPECT_EQ(count("error"), 1u);
  fail = false;
  auto fine = answerReview("check", handler, kReview, options);
  EXPECT_EQ(fine.status, 200);
  EXPECT_NE(fine.body.find(R"("allowed":true)"), std::string::npos);
  EXPECT_EQ(count("allowed"), 1u);
  const auto text = registry.render();
  EXPECT_NE(text.find(R"(tally_webhook_requests_total{operation="CREATE",result="error",webhook="check"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tally_webhook_duration_seconds_count{webhook=\"check\"} 2"), std::string::npos);
}

Answer setsScheduler(const AdmissionRequest&) {
  JsonPatch patch;
  patch.add("/spec/schedulerName", R"("tally")");
  return Answer::patch(std::move(patch));
}

TEST_F(Fixture, ValidatorRefusalIsCountedOncePerCode) {
  Validator validator{[](const AdmissionRequest&) {
    return Answer::refuse(std::vector<std::string>{"TooBig", "NotYours"}, 403, "no", "Forbidden");
  }};
  auto r = answerReview("check", validator, kReview, options);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("allowed":false,"status":{"code":403,"message":"no","reason":"Forbidden"})"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(count("refused"), 1u);
  EXPECT_EQ(options.metrics->refusals("check", Operation::kCreate, "TooBig").value(), 1u);
  EXPECT_EQ(options.metrics->refusals("check", Operation::kCreate, "NotYours").value(), 1u);
  EXPECT_NE(
      registry.render().find(R"(tally_webhook_refusals_total{code="TooBig",operation="CREATE",webhook="check"} 1)"),
      std::string::npos);
}

TEST_F(Fixture, RefusalNamingNoCodeIsCountedAsUnspecified) {
  Validator validator{[](const AdmissionRequest&) { return Answer{AdmissionResponse::refuse(403, "no"), {}}; }};
  answerReview("check", validator, kReview, options);
  EXPECT_EQ(options.metrics->refusals("check", Operation::kCreate, "Unspecified").value(), 1u);
}

TEST_F(Fixture, BareHandlerRefusalIsCountedByResultOnly) {
  answerReview(
      "check", [](const AdmissionRequest&) { return AdmissionResponse::refuse(403, "no"); }, kReview, options);
  EXPECT_EQ(count("refused"), 1u);
  EXPECT_EQ(registry.render().find("tally_webhook_refusals_total"), std::string::npos) << registry.render();
}

TEST_F(Fixture, MutatorPatchGoesOutAsJsonPatch) {
  Mutator mutator{setsScheduler};
  auto r = answerReview("check", mutator, kReview, options);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("patchType":"JSONPatch")"), std::string::npos) << r.body;
  EXPECT_EQ(count("allowed"), 1u);
}

TEST_F(Fixture, ValidatorAnsweringAPatchIs500) {
  Validator validator{setsScheduler};
  auto r = answerReview("check", validator, kReview, options);
  EXPECT_EQ(r.status, 500);
  EXPECT_NE(r.body.find("a validating webhook answered a patch"), std::string::npos) << r.body;
  EXPECT_EQ(count("error"), 1u);
}

TEST_F(Fixture, EmptyPatchIsAPlainAllow) {
  EXPECT_TRUE(Answer::patch({}).response.patch.empty());
  EXPECT_TRUE(Answer::patch({}).allowed());
}

TEST(Webhook, WorksWithoutMetrics) {
  auto r = answerReview("plain", [](const AdmissionRequest&) { return AdmissionResponse::allow(); }, "{}", {});
  EXPECT_EQ(r.status, 400);
}

}  // namespace
}  // namespace tally::runtime::admission
