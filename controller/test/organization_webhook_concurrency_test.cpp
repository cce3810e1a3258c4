// The Organization webhook's route: decided on the state writer's thread
// (which sees pods no snapshot holds), answered through a promise, refused
// closed before the caches sync or when the writer does not answer in time;
// an answer that waits on the caches is decided again as they change, for a while.

#include <gtest/gtest.h>

#include <thread>

#include "organization_review.hpp"
#include "tally/model/index.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace org_review;
using namespace std::chrono_literals;

// --- The route: decided on the writer's thread ------------------------------

struct OrganizationRoute : OrganizationChanges {
  CacheChanges changes;
  std::unique_ptr<state::Writer> writer;
  void start(std::set<model::Kind> watched = {}) {
    state::Writer::Options o;
    o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
    o.watched = std::move(watched);
    o.observers = {&changes};
    writer = std::make_unique<state::Writer>(o);
    state::upsertCluster(*writer, c);
    writer->upsert(state::Object(c.ledger));
    writer->start();
    writer->flush();
  }
  void TearDown() override {
    if (writer) writer->stop();
  }
  AdmissionResponse answer(std::vector<std::pair<std::string, int>> to, OrganizationWebhookOptions options = {}) {
    auto handler = organizationWebhook(writer->snapshots(), *writer, changes, options);
    return handler.decide(request(reviewJson(orgJson(addons(to)), orgJson(addons({{"h200-quota", 3}}))))).response;
  }
};

TEST_F(OrganizationRoute, HoldersArePodsTheWriterSeesThoughNoSnapshotHoldsThem) {
  start();
  ASSERT_TRUE(writer->snapshots().read()->cluster().pods.empty());
  AdmissionResponse r = answer({{"h200-quota", 2}});
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
  EXPECT_NE(r.message.find("pod/acme-ml/trainer: 2"), std::string::npos) << r.message;
  EXPECT_TRUE(answer({{"h200-quota", 4}}).allowed);
}

TEST_F(OrganizationRoute, RefusedClosedBeforeTheCachesSync) {
  start({model::Kind::Pod});
  EXPECT_TRUE(refusedWith(answer({{"h200-quota", 4}}), "CacheNotSynced"));
}

TEST_F(OrganizationRoute, RefusedClosedWhenTheWriterDoesNotAnswerInTime) {
  start();
  writer->post([](model::UsageIndex&) { std::this_thread::sleep_for(500ms); }, true);
  OrganizationWebhookOptions options;
  options.decisionTimeout = 50ms;
  AdmissionResponse r = answer({{"h200-quota", 4}}, options);
  EXPECT_TRUE(refusedWith(r, "DecisionTimeout")) << r.message;
}

// The plan-quota HRQ the quota reconciler just created reaches this
// replica's cache a moment after the API server has it: an increase decided
// in between is unknown, and is decided again until the HRQ arrives.
TEST_F(OrganizationRoute, UnknownAnswerIsDecidedAgainUntilTheMissingHrqArrives) {
  const model::HierarchicalResourceQuota quota = c.hrqs.at("acme/plan-quota");
  c.hrqs.clear();
  start();
  OrganizationWebhookOptions now;
  now.settle = 0ms;
  AdmissionResponse unknown = answer({{"h200-quota", 4}}, now);
  EXPECT_TRUE(refusedWith(unknown, "InvariantUnknown")) << unknown.message;
  EXPECT_NE(unknown.message.find("HRQ acme/plan-quota is missing"), std::string::npos) << unknown.message;

  std::jthread arrives([&] {
    std::this_thread::sleep_for(300ms);
    writer->upsert(state::Object(quota));
  });
  const auto asked = std::chrono::steady_clock::now();
  AdmissionResponse settled = answer({{"h200-quota", 4}});
  EXPECT_TRUE(settled.allowed) << settled.message;
  EXPECT_GE(std::chrono::steady_clock::now() - asked, 250ms);
}

TEST_F(OrganizationRoute, UnknownAnswerIsRefusedOnceTheSettleTimeIsOver) {
  c.hrqs.clear();
  start();
  OrganizationWebhookOptions options;
  options.settle = 400ms;
  const auto asked = std::chrono::steady_clock::now();
  AdmissionResponse r = answer({{"h200-quota", 4}}, options);
  EXPECT_TRUE(refusedWith(r, "InvariantUnknown")) << r.message;
  EXPECT_GE(std::chrono::steady_clock::now() - asked, 300ms);
}

// A refusal no event can change (a reduction below what holders use) is not
// decided again.
TEST_F(OrganizationRoute, DecidedRefusalIsAnsweredAtOnce) {
  start();
  OrganizationWebhookOptions options;
  options.settle = 5s;
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_TRUE(refusedWith(answer({{"h200-quota", 2}}, options), "AddonReductionBlocked"));
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 4s);
}

}  // namespace
}  // namespace tally::controller
