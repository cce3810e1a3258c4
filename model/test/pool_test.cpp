#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/pool.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct H200Pool : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    Addon reserved;
    reserved.id = "h200-reserved";
    reserved.selfService = false;
    reserved.gpu["h200"] = GpuGrant{1, 0, 0, 0};
    Addon plain;
    plain.id = "h200-quota";
    plain.selfService = true;
    plain.gpu["h200"] = GpuGrant{1, 0, 0, 0};
    c.plans->addons[reserved.id] = reserved;
    c.plans->addons[plain.id] = plain;
  }
};

TEST_F(H200Pool, InvariantHoldsWithHeadroom) {
  put(c, org("acme", {{"h200-quota", 3}}));
  put(c, hrq("acme", "plan-quota", key, 3));
  auto inv = evaluateInvariant(c, c.classes.at("h200"));
  EXPECT_EQ(inv.healthy.units, 8);
  EXPECT_EQ(inv.nonReservedHard.units, 3);
  EXPECT_EQ(inv.spare.units, 1);
  EXPECT_EQ(inv.headroom, 4);
  EXPECT_TRUE(inv.holds());
}

TEST_F(H200Pool, InvariantUsesHardQuotaNotUsage) {
  put(c, org("acme"));
  put(c, hrq("acme", "plan-quota", key, 9));
  // Nobody uses anything, and still the pool is oversold.
  auto inv = evaluateInvariant(c, c.classes.at("h200"));
  EXPECT_FALSE(inv.holds());
  EXPECT_EQ(inv.headroom, 8 - 9 - 1);
}

TEST_F(H200Pool, PendingRecordsCount) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 3, ReservationState::Pending));
  c.ledger.records.push_back(record("gpu-res-2", "beta", "h200", 2, ReservationState::Active));
  c.ledger.records.push_back(record("gpu-res-3", "beta", "h200", 5, ReservationState::Released));
  c.ledger.records.push_back(record("gpu-res-4", "beta", "h200", 5, ReservationState::Canceled));
  auto inv = evaluateInvariant(c, c.classes.at("h200"));
  EXPECT_EQ(inv.reserved.units, 5);
  EXPECT_EQ(inv.reserved.sources.size(), 2u);
}

TEST_F(H200Pool, ReservationAddonIsNotCountedTwice) {
  // 2 reserved devices granted through the reservation add-on plus 3 plain.
  put(c, org("acme", {{"h200-reserved", 2}, {"h200-quota", 3}}));
  put(c, hrq("acme", "plan-quota", key, 5));
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
  auto inv = evaluateInvariant(c, c.classes.at("h200"));
  EXPECT_EQ(inv.reserved.units, 2);
  EXPECT_EQ(inv.nonReservedHard.units, 3);
  EXPECT_EQ(inv.headroom, 8 - 2 - 3 - 1);
}

TEST_F(H200Pool, QuantitiesOfAnotherPoolNeverCount) {
  put(c, vgpuClass());
  put(c, org("acme"));
  put(c, hrq("acme", "plan-quota", quotaKey(kA100Vgpu), 50));
  c.ledger.records.push_back(record("gpu-res-9", "acme", "a100-10c", 7, ReservationState::Active));
  auto inv = evaluateInvariant(c, c.classes.at("h200"));
  EXPECT_EQ(inv.reserved.units, 0);
  EXPECT_EQ(inv.nonReservedHard.units, 0);
}

TEST(Spare, DefaultsToOneDeviceForAPoolOfMoreThanOne) { EXPECT_EQ(spareDevices(passthroughClass(), 8), 1); }

TEST(Spare, ZeroOnlyForAnApprovedOneDevicePilot) {
  auto cls = passthroughClass();
  EXPECT_EQ(spareDevices(cls, 1), 1);
  cls.singleDevicePilotApproved = true;
  EXPECT_EQ(spareDevices(cls, 1), 0);
  EXPECT_EQ(spareDevices(cls, 2), 1);
  cls.operatorSpareDevices = 0;
  EXPECT_EQ(spareDevices(cls, 4), 1);
  cls.operatorSpareDevices = 3;
  EXPECT_EQ(spareDevices(cls, 4), 3);
}

TEST(SharedPool, TermsAreCountedInShares) {
  Cluster c = syncedCluster();
  auto cls = sharedClass("v100-8g", 16384, 8192, 25, 4);  // 2 shares per GPU
  put(c, cls);
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 20);
  n.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu), parent("g2", true, kHamiGpu)};
  put(c, n);
  put(c, org("acme"));
  put(c, hrq("acme", "plan-quota", quotaKey(kHamiGpu), 3));
  auto inv = evaluateInvariant(c, c.classes.at("v100-8g"));
  EXPECT_EQ(inv.healthySchedulableDevices, 3);
  EXPECT_EQ(inv.healthy.units, 6);
  EXPECT_EQ(inv.spare.units, 2);  // one device's worth of shares
  EXPECT_EQ(inv.headroom, 6 - 3 - 2);
}

TEST_F(H200Pool, SequentialNodeCountsInOnePoolOnly) {
  put(c, sharedClass());
  auto seq = gpuNode("seq", NodeMode::VmPassthrough, kH200, 1);
  seq.allocatable.set(kHamiGpu, 10);
  seq.inventory = std::vector{parent("g0", true, kHamiGpu)};
  put(c, seq);
  EXPECT_EQ(evaluateInvariant(c, c.classes.at("h200")).healthy.units, 9);
  EXPECT_EQ(evaluateInvariant(c, c.classes.at("v100-8g")).healthy.units, 0);
}

TEST_F(H200Pool, PlanNewRecordShowsTheEquationBeforeAndAfter) {
  put(c, org("acme", {{"h200-quota", 4}}));
  put(c, hrq("acme", "plan-quota", key, 4));
  auto ok = plan(c, AddRecordChange{record("gpu-res-7", "beta", "h200", 3, ReservationState::Pending)});
  EXPECT_TRUE(ok.decision.allowed()) << ok.decision.summary();
  ASSERT_EQ(ok.after.size(), 1u);
  EXPECT_EQ(ok.before[0].headroom, 3);
  EXPECT_EQ(ok.after[0].headroom, 0);
  auto tooMuch = plan(c, AddRecordChange{record("gpu-res-8", "beta", "h200", 4, ReservationState::Pending)});
  ASSERT_FALSE(tooMuch.decision.allowed());
  EXPECT_EQ(tooMuch.decision.refusals.back().code, Code::InvariantBroken);
  EXPECT_NE(tooMuch.decision.summary().find("healthy 8 >= reserved 4 + non-reserved hard quota 4 + spare 1"),
            std::string::npos)
      << tooMuch.decision.summary();
}

TEST_F(H200Pool, PlanAddonIncreaseRaisesHardQuotaAndCanBreakTheInvariant) {
  put(c, org("acme", {{"h200-quota", 4}}));
  put(c, hrq("acme", "plan-quota", key, 4));
  auto r = plan(c, AddonQuantityChange{"acme", "h200-quota", 8});
  ASSERT_EQ(r.after.size(), 1u);
  EXPECT_EQ(r.after[0].nonReservedHard.units, 8);
  EXPECT_FALSE(r.decision.allowed());
  EXPECT_TRUE(plan(c, AddonQuantityChange{"acme", "h200-quota", 6}).decision.allowed());
}

TEST_F(H200Pool, PlanModeTransitionIsRefusedWhileTheNodeHasHolders) {
  put(c, sharedClass());
  put(c, gpuPod("t", "vm-pod", kH200, 1, "gpu-2"));
  auto r = plan(c, NodeModeChange{"gpu-2", NodeMode::PodHami});
  ASSERT_FALSE(r.decision.allowed());
  EXPECT_EQ(r.decision.refusals.front().code, Code::ModeTransitionBlocked);
  EXPECT_NE(r.decision.refusals.front().message.find("pod/t/vm-pod"), std::string::npos);
}

TEST_F(H200Pool, PlanModeTransitionIsRefusedWhenItBreaksThePoolItLeaves) {
  auto shared = sharedClass();
  shared.creationPaused = true;
  put(c, shared);
  c.classes.at("h200").creationPaused = true;  // both gates closed for the transition
  put(c, org("acme", {{"h200-quota", 6}}));
  put(c, hrq("acme", "plan-quota", key, 6));
  auto r = plan(c, NodeModeChange{"gpu-2", NodeMode::PodHami});
  ASSERT_FALSE(r.decision.allowed());
  EXPECT_EQ(r.decision.refusals.front().code, Code::InvariantBroken);
  EXPECT_TRUE(plan(c, NodeModeChange{"gpu-2", NodeMode::VmPassthrough}).decision.allowed());
}

// One figure set for every dashboard: whole devices rounded down, a count
// below zero shown as 0, headroom with its sign.
TEST(PoolFigures, DevicesAreWholeCountsNeverNegativeAndHeadroomKeepsItsSign) {
  PoolInvariant inv;
  inv.unitsPerDevice = 2;
  inv.healthySchedulableDevices = 3;
  inv.healthy.units = 6;
  inv.reserved.units = 5;
  inv.nonReservedHard.units = -3;
  inv.spare.units = 2;
  inv.headroom = -4;
  const PoolFigures f = poolFigures(inv);
  EXPECT_EQ(f.healthySchedulableDevices, 3);
  EXPECT_EQ(f.healthySchedulableUnits, 6);
  EXPECT_EQ(f.reservedDevices, 2);
  EXPECT_EQ(f.reservedUnits, 5);
  EXPECT_EQ(f.nonReservedHardQuota, 0);
  EXPECT_EQ(f.spareDevices, 1);
  EXPECT_EQ(f.spareUnits, 2);
  EXPECT_EQ(f.headroom, -4);
  inv.unitsPerDevice = 0;  // never divides by zero
  EXPECT_EQ(poolFigures(inv).reservedDevices, 5);
}

}  // namespace
}  // namespace tally::model
