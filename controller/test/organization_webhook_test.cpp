// The Organization webhook: each refusal of an add-on change, decided on a
// hand-built cluster that holds pods, and the route's way there (the state
// writer's thread, refused closed before the caches sync or past the timeout).

#include "tally/controller/organization_webhook.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "fixtures.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/index.hpp"
#include "tally/model/usage.hpp"

namespace tally::controller {
namespace {

using namespace model::testing;
using namespace std::chrono_literals;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;

std::string orgJson(const std::string& addons) {
  std::string escaped;
  for (char ch : addons) {
    if (ch == '"') escaped += '\\';
    escaped += ch;
  }
  return R"({"apiVersion":"kube-dc.com/v1","kind":"Organization","metadata":{"name":"acme","namespace":"acme",)"
         R"("annotations":{"billing.kube-dc.com/addons":")" +
         escaped + R"("}}})";
}

std::string addons(std::vector<std::pair<std::string, int>> list) {
  std::string out = "[";
  for (const auto& [id, q] : list) {
    out += (out.size() > 1 ? "," : "") + std::string(R"({"addonId":")") + id + R"(","quantity":)" + std::to_string(q) +
           "}";
  }
  return out + "]";
}

std::string reviewJson(const std::string& object, const std::string& oldObject, bool dryRun = false) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"kube-dc.com","version":"v1","kind":"Organization"},)"
         R"("resource":{"group":"kube-dc.com","version":"v1","resource":"organizations"},)"
         R"("name":"acme","namespace":"acme","operation":"UPDATE","userInfo":{"username":"admin"},"dryRun":)" +
         std::string(dryRun ? "true" : "false") + R"(,"object":)" + object + R"(,"oldObject":)" + oldObject + "}}";
}

AdmissionRequest request(const std::string& review) {
  auto r = runtime::admission::decodeAdmissionReview(review);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return std::move(r).value();
}

bool refusedWith(const AdmissionResponse& r, std::string_view code) {
  return !r.allowed && r.message.starts_with("tally: ") &&
         r.message.find("[" + std::string(code) + "]") != std::string::npos;
}

model::Addon grantAddon(std::string id, bool selfService) {
  model::Addon a;
  a.id = std::move(id);
  a.selfService = selfService;
  a.gpu["h200"] = model::GpuGrant{1, 0, 0, 0};
  return a;
}

// Eight H200 devices (7 to sell), acme holding 3 through h200-quota, using 3:
// a running pod of 2 in acme-ml and a held device of 1.
struct OrganizationChanges : ::testing::Test {
  model::Cluster c = syncedCluster();
  const std::string key = model::quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", model::NodeMode::VmPassthrough, kH200, 4));
    c.plans->addons["h200-quota"] = grantAddon("h200-quota", true);
    c.plans->addons["h200-reserved"] = grantAddon("h200-reserved", false);
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, org("acme", {{"h200-quota", 3}}));
    put(c, hrq("acme", "plan-quota", key, 3));
    put(c, gpuPod("acme-ml", "trainer", kH200, 2, "gpu-1"));
    put(c, device("acme-ml", "held", "h200", 1, model::DevicePhase::Bound, "gpu-2"));
  }
  AdmissionResponse change(std::vector<std::pair<std::string, int>> to, bool dryRun = false) {
    model::TotalsCapacityView view(c, model::computeUsage(c));
    return reviewOrganization(
        c, view, request(reviewJson(orgJson(addons(to)), orgJson(addons({{"h200-quota", 3}})), dryRun)), {});
  }
};

TEST_F(OrganizationChanges, ReductionBelowWhatHoldersUseIsRefusedNamingThem) {
  AdmissionResponse r = change({{"h200-quota", 2}});
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
  EXPECT_EQ(r.code, 403);
  EXPECT_NE(r.message.find("pod/acme-ml/trainer: 2"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("gpudevice/acme-ml/held: 1"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, DryRunIsAnsweredTheSame) {
  AdmissionResponse r = change({{"h200-quota", 2}}, true);
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
}

TEST_F(OrganizationChanges, ReductionRefusedWhileHncReportsMoreInUse) {
  c.pods.clear();
  c.devices.clear();
  c.hrqs.at("acme/plan-quota").statusUsed.set(key, 3);
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 1}}), "AddonReductionBlocked"));
}

TEST_F(OrganizationChanges, ReductionDownToWhatIsUsedIsAdmitted) {
  c.pods.clear();
  AdmissionResponse r = change({{"h200-quota", 1}});
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST_F(OrganizationChanges, IncreaseThatBreaksThePoolInvariantIsRefused) {
  AdmissionResponse r = change({{"h200-quota", 8}});
  EXPECT_TRUE(refusedWith(r, "InvariantBroken")) << r.message;
  EXPECT_TRUE(change({{"h200-quota", 7}}).allowed);
}

TEST_F(OrganizationChanges, IncreaseInAPoolClosedByAFailedAuditIsRefused) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "GateClosed"));
}

TEST_F(OrganizationChanges, PendingReservationsOwnGrantIsAdmittedAndNothingElse) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, model::ReservationState::Pending));
  c.classes.at("h200").gateOpen = false;  // the transaction's freeze
  AdmissionResponse own = change({{"h200-quota", 3}, {"h200-reserved", 1}});
  EXPECT_TRUE(own.allowed) << own.message;
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "TransactionInFlight"));
}

TEST_F(OrganizationChanges, AddonTheCatalogueDoesNotDefineIsRefused) {
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 3}, {"mystery", 1}}), "AddonUnknown"));
}

TEST_F(OrganizationChanges, OrganizationThisReplicaHasNotSeenIsRefusedClosed) {
  c.organizations.clear();
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "CacheNotSynced"));
}

TEST_F(OrganizationChanges, UnsyncedPodCacheIsRefusedClosed) {
  c.caches[model::Kind::Pod].synced = false;
  AdmissionResponse r = change({{"h200-quota", 2}});
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
  EXPECT_NE(r.message.find("Pod"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, UnreadableAssignmentIsInvalid) {
  model::TotalsCapacityView view(c, model::computeUsage(c));
  AdmissionResponse r =
      reviewOrganization(c, view, request(reviewJson(orgJson("not json"), orgJson(addons({{"h200-quota", 3}})))), {});
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 422) << r.message;
}

TEST_F(OrganizationChanges, ChangeThatLeavesTheAddonsAloneIsAdmitted) {
  EXPECT_TRUE(change({{"h200-quota", 3}}).allowed);
}

// --- The route: decided on the writer's thread ------------------------------

struct OrganizationRoute : OrganizationChanges {
  std::unique_ptr<state::Writer> writer;
  void start(std::set<model::Kind> watched = {}) {
    state::Writer::Options o;
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
    return handler(request(reviewJson(orgJson(addons(to)), orgJson(addons({{"h200-quota", 3}})))));
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
