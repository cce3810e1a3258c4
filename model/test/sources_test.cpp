#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/sources.hpp"

namespace tally::model {
namespace {
using namespace testing;

// The base runs with no ledger flag: the ledger is not configured, which is
// not the same as a ledger that cannot be read.
struct NoLedger : ::testing::Test {
  Cluster c = syncedCluster();
  AuditOptions later;
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    Addon reserved;
    reserved.id = "h200-reserved";
    reserved.selfService = false;
    reserved.gpu["h200"] = GpuGrant{1, 0, 0, 0};
    c.plans->addons[reserved.id] = reserved;
    c.markNotConfigured(Kind::Ledger);
    // Long past the bound: a source nobody configured is confirmed by nobody.
    later.staleAfterSeconds = 20;
    later.now = c.now + 3600;
    for (auto& [kind, cache] : c.caches) {
      if (cache.configured) cache.lastSynced = *later.now;
    }
  }
  std::vector<Finding> audit() { return auditPool(c, c.classes.at("h200"), later); }
  const Finding* find(const std::vector<Finding>& findings, FindingCode code) {
    auto it = std::find_if(findings.begin(), findings.end(), [&](const Finding& f) { return f.code == code; });
    return it == findings.end() ? nullptr : &*it;
  }
};

TEST_F(NoLedger, ALedgerNobodyConfiguredIsNeverStaleAndAPoolWithoutReservationsStaysOpen) {
  EXPECT_EQ(sourceState(c, Kind::Ledger, *later.now, later.staleAfterSeconds), SourceState::NotConfigured);
  auto findings = audit();
  EXPECT_TRUE(findings.empty()) << toString(findings.front().code) << ": " << findings.front().message;
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), findings).open);
  EXPECT_TRUE(evaluateInvariant(c, c.classes.at("h200")).unknown.empty()) << "no ledger is no reservation";
}

TEST_F(NoLedger, APoolWhoseOrganizationHoldsAReservationAddonFailsClosedNamingTheMissingFlag) {
  put(c, org("acme", {{"h200-reserved", 2}}));
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 2));
  c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{2, 0};
  auto findings = audit();
  const Finding* f = find(findings, FindingCode::LedgerNotConfigured);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->subject, "organization/acme/addon/h200-reserved");
  EXPECT_NE(f->message.find("--ledger-dir or --ledger-configmap"), std::string::npos) << f->message;
  EXPECT_NE(remedy(f->code).find("--ledger-configmap"), std::string::npos);
  EXPECT_EQ(find(findings, FindingCode::StaleCapacity), nullptr);
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), findings).failed());
}

// Configured but not read (or not confirmed within the bound) is unknown: the
// pool fails closed on StaleCapacity, as before.
TEST_F(NoLedger, AConfiguredLedgerThatCannotBeReadIsUnknownNotUnconfigured) {
  c.caches[Kind::Ledger] = CacheState{false, 0, true};
  EXPECT_EQ(sourceState(c, Kind::Ledger, *later.now, later.staleAfterSeconds), SourceState::Unsynced);
  EXPECT_NE(find(audit(), FindingCode::StaleCapacity), nullptr);
  c.caches[Kind::Ledger] = CacheState{true, c.now, true};
  EXPECT_EQ(sourceState(c, Kind::Ledger, *later.now, later.staleAfterSeconds), SourceState::Stale);
  EXPECT_NE(find(audit(), FindingCode::StaleCapacity), nullptr);
}

}  // namespace
}  // namespace tally::model
