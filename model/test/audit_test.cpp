#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "tally/model/audit.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct AuditedPool : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    auto cls = passthroughClass();
    cls.pciVendorSelector = "10DE:2335";
    put(c, cls);
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    Addon reserved;
    reserved.id = "h200-reserved";
    reserved.selfService = false;
    reserved.gpu["h200"] = GpuGrant{1, 0, 0, 0};
    c.plans->addons[reserved.id] = reserved;
    put(c, org("acme", {{"h200-reserved", 2}}));
    put(c, hrq("acme", "plan-quota", key, 2));
    c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
    c.permittedHostDevices = std::vector{PermittedHostDevice{std::string(kH200), "10DE:2335", false, false}};
  }
  std::vector<FindingCode> codes() {
    std::vector<FindingCode> out;
    for (const auto& f : auditPool(c, c.classes.at("h200"))) out.push_back(f.code);
    return out;
  }
  bool has(FindingCode code) {
    auto all = codes();
    return std::find(all.begin(), all.end(), code) != all.end();
  }
};

TEST_F(AuditedPool, CleanPoolHasNoFindings) { EXPECT_TRUE(codes().empty()); }

TEST_F(AuditedPool, ReservationAddonWithoutLedgerRecordFails) {
  c.ledger.records.clear();
  EXPECT_TRUE(has(FindingCode::MissingLedgerRecord));
}

TEST_F(AuditedPool, UnknownAddonFails) {
  c.organizations.at("acme/acme").addons.push_back({"mystery", 1});
  EXPECT_TRUE(has(FindingCode::UnknownAddon));
}

TEST_F(AuditedPool, UnsyncedCacheIsStaleCapacity) {
  c.caches[Kind::Node].synced = false;
  EXPECT_TRUE(has(FindingCode::StaleCapacity));
}

TEST_F(AuditedPool, OldCacheIsStaleCapacity) {
  c.caches[Kind::Pod].lastSynced = c.now - 3600;
  EXPECT_TRUE(has(FindingCode::StaleCapacity));
}

TEST_F(AuditedPool, HardQuotaAboveTheEquationFails) {
  put(c, org("beta"));
  put(c, hrq("beta", "plan-quota", key, 6));
  EXPECT_TRUE(has(FindingCode::HardQuotaAboveCapacity));
}

TEST_F(AuditedPool, DuplicateReservationIdFails) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, ReservationState::Pending));
  EXPECT_TRUE(has(FindingCode::DuplicateReservationId));
}

TEST_F(AuditedPool, NodeWithMismatchedModesIsAProfileModeMismatch) {
  c.nodes.at("gpu-2").activeMode = NodeMode::PodHami;
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
}

TEST_F(AuditedPool, DeviceKubeVirtDoesNotPermitIsAProfileModeMismatch) {
  c.permittedHostDevices->front().selector = "10DE:2330";
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
  c.permittedHostDevices->clear();
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
}

TEST_F(AuditedPool, FiringAlertFails) {
  c.alerts.push_back({"GPUXidErrors", "h200"});
  EXPECT_TRUE(has(FindingCode::ActiveAlert));
  c.alerts = {{"Other", "a100-10c"}};
  EXPECT_FALSE(has(FindingCode::ActiveAlert));
}

TEST_F(AuditedPool, OrganizationStatusDisagreeingWithHrqFails) {
  c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{5, 0};
  EXPECT_TRUE(has(FindingCode::StatusDisagreement));
}

TEST_F(AuditedPool, ActiveRecordAboveHrqHardFails) {
  c.hrqs.at("acme/plan-quota").hard.set(key, 1);
  EXPECT_TRUE(has(FindingCode::StatusDisagreement));
}

TEST_F(AuditedPool, MoreThanOneTransactionInFlightFails) {
  c.ledger.records.push_back(record("gpu-res-2", "beta", "h200", 1, ReservationState::Pending));
  EXPECT_FALSE(has(FindingCode::MultipleTransactions));
  c.ledger.records.push_back(record("gpu-res-3", "gamma", "h200", 1, ReservationState::Releasing));
  EXPECT_TRUE(has(FindingCode::MultipleTransactions));
}

TEST_F(AuditedPool, InvalidRecordOfThePoolFails) {
  c.ledger.invalid.push_back({"bad.yaml", "gpu-res-9", "h200", {{Code::RecordSchema, "broken"}}});
  EXPECT_TRUE(has(FindingCode::InvalidRecord));
  c.ledger.invalid.back().profileId = "a100-10c";
  EXPECT_FALSE(has(FindingCode::InvalidRecord));
}

TEST(Gate, FailingAuditClosesTheGateWithAFailureId) {
  auto cls = passthroughClass();
  auto gate = evaluateGate(cls, {{FindingCode::ActiveAlert, "alert X is firing"}}, 1000);
  EXPECT_FALSE(gate.open);
  EXPECT_EQ(gate.failureId, "h200-1000");
}

TEST(Gate, StaysClosedAfterFindingsClearUntilProductAndSreAcknowledge) {
  auto cls = passthroughClass();
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1000";
  EXPECT_FALSE(evaluateGate(cls, {}, 2000).open);
  cls.acknowledgements.push_back({"h200-1000", "product", "pat"});
  EXPECT_FALSE(evaluateGate(cls, {}, 2000).open);
  cls.acknowledgements.push_back({"h200-1000", "sre", "pat"});  // same person twice
  EXPECT_FALSE(evaluateGate(cls, {}, 2000).open);
  cls.acknowledgements.push_back({"h200-999", "sre", "sam"});  // another failure
  EXPECT_FALSE(evaluateGate(cls, {}, 2000).open);
  cls.acknowledgements.push_back({"h200-1000", "sre", "sam"});
  EXPECT_TRUE(evaluateGate(cls, {}, 2000).open);
}

TEST(Gate, AcknowledgementsDoNotOpenAGateWhileFindingsRemain) {
  auto cls = passthroughClass();
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1000";
  cls.acknowledgements = {{"h200-1000", "product", "pat"}, {"h200-1000", "sre", "sam"}};
  auto gate = evaluateGate(cls, {{FindingCode::StaleCapacity, "stale"}}, 2000);
  EXPECT_FALSE(gate.open);
  EXPECT_EQ(gate.failureId, "h200-1000");
}

TEST(Gate, InformationalFindingsDoNotClose) {
  auto cls = sharedClass();
  EXPECT_TRUE(evaluateGate(cls, {{FindingCode::SharedNodeWithoutInventory, "no inventory"}}, 1).open);
}

}  // namespace
}  // namespace tally::model
