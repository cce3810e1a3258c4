// The Organization webhook's route: decided on the state writer's thread
// (which sees pods no snapshot holds), answered through a promise, refused
// closed before the caches sync or when the writer does not answer in time.

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
  std::unique_ptr<state::Writer> writer;
  void start(std::set<model::Kind> watched = {}) {
    state::Writer::Options o;
    o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
    o.watched = std::move(watched);
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
    auto handler = organizationWebhook(writer->snapshots(), *writer, options);
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

}  // namespace
}  // namespace tally::controller
