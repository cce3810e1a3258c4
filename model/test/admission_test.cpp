#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/index.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct Orders : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 2));
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, org("acme"));
    put(c, ns("beta"));
    put(c, org("beta"));
  }
  DeviceOrder order(std::int64_t count, std::string nsName = "acme-ml", std::string cls = "h200") {
    return DeviceOrder{nsName, "gpudevice/" + nsName + "/d", {{cls, count}}};
  }
  Decision check(const DeviceOrder& o) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkDeviceOrder(c, view, o);
  }
  Code firstCode(const DeviceOrder& o) {
    auto d = check(o);
    return d.allowed() ? Code::CacheNotSynced : d.refusals.front().code;
  }
};

TEST_F(Orders, FittingOrderIsAllowed) { EXPECT_TRUE(check(order(3)).allowed()); }

TEST_F(Orders, UnknownClassIsRefused) { EXPECT_EQ(firstCode(order(1, "acme-ml", "b200")), Code::ClassUnknown); }

TEST_F(Orders, DeletingClassIsRefused) {
  c.classes.at("h200").deleting = true;
  EXPECT_EQ(firstCode(order(1)), Code::ClassDeleting);
}

TEST_F(Orders, CountAboveMaxCountIsRefusedNamingTheLimit) {
  c.classes.at("h200").maxCount = 2;
  auto d = check(order(3));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::CountAboveMax);
  EXPECT_NE(d.refusals.front().message.find("at most 2"), std::string::npos);
}

TEST_F(Orders, PoolWithoutEnoughFreeUnitsIsRefused) {
  put(c, device("beta", "held", "h200", 4, DevicePhase::Bound, "gpu-1"));
  EXPECT_EQ(firstCode(order(3)), Code::PoolInsufficient);
}

TEST_F(Orders, SetThatNoSingleNodeCanHoldIsRefused) {
  put(c, device("beta", "held", "h200", 1, DevicePhase::Bound, "gpu-1"));
  // 3 + 2 = 5 free in the pool, but the most on one node is 3.
  auto d = check(order(4));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::NoSingleNode);
  EXPECT_NE(d.refusals.front().message.find("most free on one node is 3"), std::string::npos) << d.summary();
}

TEST_F(Orders, AncestorBudgetRefuses) {
  put(c, hrq("acme", "plan-quota", key, 2));
  put(c, device("acme", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  EXPECT_EQ(firstCode(order(2)), Code::BudgetExceeded);
  EXPECT_TRUE(check(order(1)).allowed());
}

TEST_F(Orders, LicensedClassNeedsEntitlement) {
  c.classes.at("h200").requiresEntitlement = true;
  EXPECT_EQ(firstCode(order(1)), Code::NotEntitled);
  c.namespaces.at("acme").entitledClasses.push_back("h200");
  EXPECT_TRUE(check(order(1)).allowed());
}

TEST_F(Orders, ClosedGateRefusesNewOrders) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-1";
  EXPECT_EQ(firstCode(order(1)), Code::GateClosed);
}

TEST_F(Orders, IdleReservationOfAnotherOrganizationIsHeld) {
  c.ledger.records.push_back(record("gpu-res-1", "beta", "h200", 4, ReservationState::Active));
  // 6 free, 4 of them back beta's idle reservation.
  EXPECT_EQ(firstCode(order(3)), Code::ReservedForOthers);
  EXPECT_TRUE(check(order(2)).allowed());
  // The organization holding the reservation may use it.
  EXPECT_TRUE(check(order(4, "beta")).allowed());
}

TEST_F(Orders, UnsyncedCachesRefuseClosed) {
  c.caches[Kind::GpuDevice].synced = false;
  EXPECT_EQ(firstCode(order(1)), Code::CacheNotSynced);
}

TEST_F(Orders, PlacementPutsTheWholeSetOnOneNodeByBestFit) {
  TotalsCapacityView view(c, computeUsage(c));
  auto p = placeDeviceSet(c, view, order(2));
  ASSERT_TRUE(p.node);
  EXPECT_EQ(*p.node, "gpu-2");  // leaves 0 free there and gpu-1 whole
  p = placeDeviceSet(c, view, order(3));
  ASSERT_TRUE(p.node);
  EXPECT_EQ(*p.node, "gpu-1");
}

TEST_F(Orders, PlacementPrefersAUsedNodeOverBreakingAWholeOne) {
  put(c, gpuNode("gpu-3", NodeMode::VmPassthrough, kH200, 4));
  put(c, device("beta", "held", "h200", 2, DevicePhase::Bound, "gpu-1"));
  put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 0));
  TotalsCapacityView view(c, computeUsage(c));
  auto p = placeDeviceSet(c, view, order(1));
  ASSERT_TRUE(p.node);
  EXPECT_EQ(*p.node, "gpu-1");
}

TEST_F(Orders, PlacementIsDeterministic) {
  put(c, gpuNode("gpu-0", NodeMode::VmPassthrough, kH200, 2));
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_EQ(*placeDeviceSet(c, view, order(2)).node, "gpu-0");
}

TEST_F(Orders, AddonReductionIsRefusedWhileHoldersRemainAndNamesThem) {
  Addon plain;
  plain.id = "h200-quota";
  plain.gpu["h200"] = GpuGrant{1, 0, 0, 0};
  c.plans->addons[plain.id] = plain;
  c.organizations.at("acme/acme").addons = {{"h200-quota", 3}};
  put(c, hrq("acme", "plan-quota", key, 3));
  put(c, gpuPod("acme-ml", "trainer", kH200, 2, "gpu-1"));
  Organization after = c.organizations.at("acme/acme");
  after.addons[0].quantity = 1;
  TotalsCapacityView view(c, computeUsage(c));
  auto d = checkAddonChange(c, view, c.organizations.at("acme/acme"), after);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::AddonReductionBlocked);
  EXPECT_NE(d.summary().find("pod/acme-ml/trainer: 2"), std::string::npos) << d.summary();
  after.addons[0].quantity = 2;
  EXPECT_TRUE(checkAddonChange(c, view, c.organizations.at("acme/acme"), after).allowed());
}

TEST_F(Orders, AddonReductionRespectsHrqStatusUsage) {
  Addon plain;
  plain.id = "h200-quota";
  plain.gpu["h200"] = GpuGrant{1, 0, 0, 0};
  c.plans->addons[plain.id] = plain;
  c.organizations.at("acme/acme").addons = {{"h200-quota", 3}};
  auto q = hrq("acme", "plan-quota", key, 3);
  q.statusUsed.set(key, 3);  // usage Tally's caches don't see yet
  put(c, q);
  Organization after = c.organizations.at("acme/acme");
  after.addons[0].quantity = 2;
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_FALSE(checkAddonChange(c, view, c.organizations.at("acme/acme"), after).allowed());
}

struct PodFilter : Orders {
  NodeVerdict filter(const Pod& pod, const std::string& node) {
    TotalsCapacityView view(c, computeUsage(c));
    auto demand = podDemand(c, view, pod);
    return filterNode(c, view, demand, c.nodes.at(node));
  }
};

TEST_F(PodFilter, PodFitsWhereFreeUnitsSuffice) {
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  EXPECT_EQ(filter(pod, "gpu-1").verdict, Verdict::Fits);
}

TEST_F(PodFilter, HeldDeviceKeepsRawPodsOffItsUnits) {
  put(c, device("beta", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  auto v = filter(pod, "gpu-2");
  EXPECT_EQ(v.verdict, Verdict::Unschedulable);
  EXPECT_EQ(v.reason->code, Code::NodeInsufficient);
  EXPECT_NE(v.reason->message.find("1 of 2"), std::string::npos) << v.reason->message;
  EXPECT_NE(v.reason->message.find("1 held by GPUDevices"), std::string::npos) << v.reason->message;
}

TEST_F(PodFilter, WrongModeIsUnresolvable) {
  put(c, gpuNode("hami", NodeMode::PodHami, kH200, 8));
  auto pod = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  EXPECT_EQ(filter(pod, "hami").verdict, Verdict::Unresolvable);
}

TEST_F(PodFilter, ClosedGateIsUnresolvable) {
  c.classes.at("h200").gateOpen = false;
  auto pod = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  auto v = filter(pod, "gpu-1");
  EXPECT_EQ(v.verdict, Verdict::Unresolvable);
  EXPECT_EQ(v.reason->code, Code::GateClosed);
}

TEST_F(PodFilter, LauncherGoesOnlyToItsDevicesNode) {
  VirtualMachineInstance vmi;
  vmi.ns = "acme-ml";
  vmi.name = "vm";
  vmi.uid = "uid-vm";
  vmi.activePods["uid-launcher"] = "";
  put(c, vmi);
  auto d = device("acme-ml", "dev", "h200", 2, DevicePhase::Attached, "gpu-2");
  d.attachedTo = {"acme-ml", "vm", "uid-vm"};
  put(c, d);
  auto launcher = gpuPod("acme-ml", "launcher", kH200, 2, "", PodPhase::Pending);
  EXPECT_EQ(filter(launcher, "gpu-2").verdict, Verdict::Fits);  // covered by its own devices
  auto v = filter(launcher, "gpu-1");
  EXPECT_EQ(v.verdict, Verdict::Unresolvable);
  EXPECT_EQ(v.reason->code, Code::LauncherWrongNode);
}

TEST_F(PodFilter, ImpostorCannotBorrowTheVmisDevices) {
  VirtualMachineInstance vmi;
  vmi.ns = "acme-ml";
  vmi.name = "vm";
  vmi.uid = "uid-vm";
  put(c, vmi);
  auto d = device("acme-ml", "dev", "h200", 2, DevicePhase::Attached, "gpu-2");
  d.attachedTo = {"acme-ml", "vm", "uid-vm"};
  put(c, d);
  auto impostor = gpuPod("acme-ml", "impostor", kH200, 2, "", PodPhase::Pending);
  impostor.owners.push_back({"VirtualMachineInstance", "vm", "uid-vm", true});
  EXPECT_EQ(filter(impostor, "gpu-2").verdict, Verdict::Unschedulable);
}

TEST_F(PodFilter, OverBudgetPodIsUnschedulableEverywhere) {
  put(c, hrq("acme", "plan-quota", key, 1));
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  auto v = filter(pod, "gpu-1");
  EXPECT_EQ(v.verdict, Verdict::Unschedulable);
  EXPECT_EQ(v.reason->code, Code::BudgetExceeded);
}

TEST_F(PodFilter, PodAlreadyCountedIsNotChargedTwice) {
  put(c, hrq("acme", "plan-quota", key, 2));
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  put(c, pod);  // the pending pod is in the cache and counted once
  EXPECT_EQ(filter(pod, "gpu-1").verdict, Verdict::Fits);
}

TEST_F(PodFilter, IdleReservationOfAnotherOrgKeepsPodsOff) {
  c.ledger.records.push_back(record("gpu-res-1", "beta", "h200", 5, ReservationState::Active));
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  auto v = filter(pod, "gpu-1");
  EXPECT_EQ(v.verdict, Verdict::Unschedulable);
  EXPECT_EQ(v.reason->code, Code::ReservedForOthers);
  auto own = gpuPod("beta", "p", kH200, 2, "", PodPhase::Pending);
  EXPECT_EQ(filter(own, "gpu-1").verdict, Verdict::Fits);
}

TEST_F(PodFilter, UnsyncedCachesAreUnresolvable) {
  c.caches[Kind::Pod].synced = false;
  auto pod = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  EXPECT_EQ(filter(pod, "gpu-1").reason->code, Code::CacheNotSynced);
}

TEST_F(PodFilter, AssumedPlacementsCountUntilForgotten) {
  auto index = UsageIndex::fromCluster(c);
  auto first = gpuPod("acme-ml", "a", kH200, 2, "", PodPhase::Pending);
  index.assume(first, "gpu-2");
  auto second = gpuPod("acme-ml", "b", kH200, 1, "", PodPhase::Pending);
  auto demand = podDemand(index.cluster(), index, second);
  EXPECT_EQ(filterNode(index.cluster(), index, demand, index.cluster().nodes.at("gpu-2")).verdict,
            Verdict::Unschedulable);
  index.forget(first.uid);
  EXPECT_EQ(filterNode(index.cluster(), index, demand, index.cluster().nodes.at("gpu-2")).verdict, Verdict::Fits);
}

TEST_F(PodFilter, BinPackScoresFullerNodesHigherAndSpreadTheOpposite) {
  put(c, device("beta", "held", "h200", 2, DevicePhase::Bound, "gpu-1"));
  TotalsCapacityView view(c, computeUsage(c));
  auto pod = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  auto demand = podDemand(c, view, pod);
  int packed = scoreNode(c, view, demand, c.nodes.at("gpu-1"), ScoreStrategy::BinPack);
  int whole = scoreNode(c, view, demand, c.nodes.at("gpu-2"), ScoreStrategy::BinPack);
  EXPECT_GT(packed, whole);
  EXPECT_LT(scoreNode(c, view, demand, c.nodes.at("gpu-1"), ScoreStrategy::Spread),
            scoreNode(c, view, demand, c.nodes.at("gpu-2"), ScoreStrategy::Spread));
  for (int s : {packed, whole}) {
    EXPECT_GE(s, 0);
    EXPECT_LE(s, 10);
  }
}

TEST_F(PodFilter, PreemptionKeepsOnlyVictimsThatMakeThePodFit) {
  put(c, gpuPod("beta", "cpu-only", "example.com/foo", 1, "gpu-2"));
  put(c, gpuPod("beta", "small", kH200, 1, "gpu-2"));
  put(c, gpuPod("beta", "big", kH200, 1, "gpu-2"));
  TotalsCapacityView view(c, computeUsage(c));
  auto pod = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  auto demand = podDemand(c, view, pod);
  std::vector<const Pod*> candidates{&c.pods.at("beta/cpu-only"), &c.pods.at("beta/small"), &c.pods.at("beta/big")};
  auto kept = narrowVictims(c, view, demand, c.nodes.at("gpu-2"), candidates);
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0]->name, "small");
  auto huge = gpuPod("acme-ml", "huge", kH200, 3, "", PodPhase::Pending);
  auto hugeDemand = podDemand(c, view, huge);
  EXPECT_FALSE(narrowVictims(c, view, hugeDemand, c.nodes.at("gpu-2"), candidates));
}

TEST_F(PodFilter, RawPodBudgetWebhookRefusesOverBudgetPods) {
  put(c, hrq("acme", "plan-quota", key, 1));
  TotalsCapacityView view(c, computeUsage(c));
  auto d = checkPodBudget(c, view, gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::BudgetExceeded);
}

}  // namespace
}  // namespace tally::model

namespace tally::model {
namespace {
using namespace testing;

// Pending pods of the reserving organization occupy nothing yet: until they are
// placed, the reserved units stay held for them.
TEST_F(PodFilter, PendingPodsOfTheReservingOrgKeepItsReservationHeld) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 4, ReservationState::Active));
  put(c, gpuPod("beta", "b1", kH200, 2, "gpu-2"));
  for (int i = 0; i < 4; ++i) put(c, gpuPod("acme-ml", "a" + std::to_string(i), kH200, 1, "", PodPhase::Pending));
  auto intruder = gpuPod("beta", "b2", kH200, 1, "", PodPhase::Pending);
  auto v = filter(intruder, "gpu-1");
  EXPECT_EQ(v.verdict, Verdict::Unschedulable);
  EXPECT_EQ(v.reason->code, Code::ReservedForOthers);
  // Once acme's pods run, what is left beyond the reservation is beta's again.
  for (int i = 0; i < 2; ++i) c.pods.at("acme-ml/a" + std::to_string(i)).nodeName = "gpu-1";
  EXPECT_EQ(filter(intruder, "gpu-1").verdict, Verdict::Unschedulable);
}

}  // namespace
}  // namespace tally::model
