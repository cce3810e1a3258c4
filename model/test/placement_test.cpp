// The binder's rules: placement of admitted orders in arrival order, placements
// held ahead of the watch, Lost and recovery.

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/placement.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {

using namespace testing;

class Binder : public ::testing::Test {
 protected:
  void SetUp() override {
    c = syncedCluster();
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 2));
    put(c, ns("alpha"));
  }
  GpuDevice pending(std::string name, std::int64_t count, Timestamp created) {
    GpuDevice d = device("alpha", std::move(name), "h200", count, DevicePhase::Pending);
    d.created = created;
    return d;
  }
  Placement place(const GpuDevice& d, const HeldAheadView& view) { return placeHeldDevice(c, view, d); }
  Cluster c;
};

TEST_F(Binder, APendingOrderIsNotChargedTwiceAgainstItsOwnBudget) {
  put(c, hrq("alpha", "plan-quota", budgetKeyFor(std::string(kH200)), 2));
  GpuDevice d = pending("d", 2, 10);
  put(c, d);
  TotalsCapacityView totals(c, computeUsage(c));
  HeldAheadView view(c, totals);
  // checkDeviceOrder would count it twice (2 pending + 2 asked > 2).
  auto p = place(d, view);
  ASSERT_TRUE(p.node) << p.decision.summary();
  EXPECT_EQ(*p.node, "gpu-2");
}

TEST_F(Binder, RacingOrdersOverABudgetArePlacedInArrivalOrder) {
  put(c, hrq("alpha", "plan-quota", budgetKeyFor(std::string(kH200)), 3));
  GpuDevice first = pending("z-first", 2, 10), second = pending("a-second", 2, 20), third = pending("b-third", 1, 30);
  put(c, first);
  put(c, second);
  put(c, third);
  TotalsCapacityView totals(c, computeUsage(c));
  HeldAheadView view(c, totals);
  EXPECT_TRUE(place(first, view).node);
  // 2 (first) + 2 > 3: the second waits with the budget named ...
  auto p = place(second, view);
  EXPECT_FALSE(p.node);
  ASSERT_FALSE(p.decision.refusals.empty());
  EXPECT_EQ(p.decision.refusals[0].code, Code::BudgetExceeded) << p.decision.summary();
  // ... and so does the third: the second came first and still counts (2 + 2 + 1 > 3).
  EXPECT_FALSE(place(third, view).node);
}

TEST_F(Binder, PlacementsHeldAheadTakeTheirUnits) {
  GpuDevice a = pending("a", 2, 10), b = pending("b", 2, 20), x = pending("x", 2, 30);
  put(c, a);
  put(c, b);
  put(c, x);
  TotalsCapacityView totals(c, computeUsage(c));
  HeldAheadView view(c, totals);
  auto pa = place(a, view);
  ASSERT_TRUE(pa.node);
  EXPECT_EQ(*pa.node, "gpu-2");
  view.hold(a, *pa.node);
  EXPECT_TRUE(view.holds("alpha", "a"));
  EXPECT_EQ(view.nodeUsed("gpu-2", kH200), 2);
  EXPECT_EQ(view.poolFreeUnits(c, c.classes.at("h200")), 4);
  auto pb = place(b, view);
  ASSERT_TRUE(pb.node);
  EXPECT_EQ(*pb.node, "gpu-1");  // gpu-2 is full now, though the cluster still shows a Pending
  view.hold(b, *pb.node);
  auto px = place(x, view);
  ASSERT_TRUE(px.node);
  view.hold(x, *px.node);
  EXPECT_EQ(view.poolFreeUnits(c, c.classes.at("h200")), 0);
  GpuDevice late = pending("late", 1, 40);
  put(c, late);
  auto none = place(late, view);
  EXPECT_FALSE(none.node);
  ASSERT_FALSE(none.decision.refusals.empty());
  EXPECT_EQ(none.decision.refusals[0].code, Code::PoolInsufficient) << none.decision.summary();
}

TEST_F(Binder, AGoneNodeLosesItsDevicesButNotReadinessOrCordon) {
  GpuDevice held = device("alpha", "held", "h200", 2, DevicePhase::Bound, "gpu-1");
  put(c, held);
  EXPECT_FALSE(holdLost(c, held));
  c.nodes.at("gpu-1").ready = false;
  c.nodes.at("gpu-1").unschedulable = true;
  EXPECT_FALSE(holdLost(c, held));
  c.nodes.erase("gpu-1");
  auto lost = holdLost(c, held);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->code, Code::NodeGone);
  EXPECT_NE(lost->message.find("node gpu-1"), std::string::npos) << lost->message;
  EXPECT_FALSE(holdLost(c, pending("p", 1, 1)));  // a Pending device holds nothing to lose
}

TEST_F(Binder, FewerDevicesOnTheNodeLoseTheLastPlacedFirst) {
  GpuDevice early = device("alpha", "early", "h200", 2, DevicePhase::Bound, "gpu-1");
  early.created = 10;
  GpuDevice late = device("alpha", "late", "h200", 2, DevicePhase::Attached, "gpu-1");
  late.created = 20;
  late.attachedTo = {"alpha", "vm", "vm-uid"};
  put(c, early);
  put(c, late);
  c.nodes.at("gpu-1").allocatable.set(kH200, 3);
  EXPECT_FALSE(holdLost(c, early));
  auto lost = holdLost(c, late);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->code, Code::DeviceUnavailable);
  EXPECT_NE(lost->message.find("advertises 3"), std::string::npos) << lost->message;
}

TEST_F(Binder, ALostDeviceRecoversOnlyWithItsUnitsFree) {
  GpuDevice lost = device("alpha", "lost", "h200", 2, DevicePhase::Lost, "gpu-1");
  put(c, lost);
  c.nodes.erase("gpu-1");
  {
    TotalsCapacityView view(c, computeUsage(c));
    auto d = checkRecovery(c, view, lost);
    ASSERT_FALSE(d.allowed());
    EXPECT_EQ(d.refusals[0].code, Code::NodeGone);
  }
  put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
  put(c, device("alpha", "took", "h200", 3, DevicePhase::Bound, "gpu-1"));
  {
    TotalsCapacityView view(c, computeUsage(c));
    auto d = checkRecovery(c, view, lost);
    ASSERT_FALSE(d.allowed());
    EXPECT_EQ(d.refusals[0].code, Code::NodeInsufficient);
    EXPECT_NE(d.refusals[0].message.find("1 free unit"), std::string::npos) << d.refusals[0].message;
  }
  c.devices.erase("alpha/took");
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_TRUE(checkRecovery(c, view, lost).allowed());
}

TEST_F(Binder, AVmiSetGoesWholeToOneNodeWhereItsMembersAloneWouldSplit) {
  // gpu-2 (2 free) is the best fit for one device of 2, gpu-1 (4) for the set of 4.
  GpuDevice a = pending("a", 2, 10), b = pending("b", 2, 20);
  put(c, a);
  put(c, b);
  VirtualMachineInstance vm;
  vm.ns = "alpha";
  vm.name = "vm";
  vm.uid = "vm-uid";
  vm.heldDevices = {"a", "b", "not-there"};
  put(c, vm);
  auto set = deviceSetOf(c, c.devices.at("alpha/a"));
  ASSERT_EQ(set.members.size(), 2u);
  EXPECT_EQ(set.members[1]->name, "b");
  EXPECT_EQ(set.missing, std::vector<std::string>{"not-there"});
  EXPECT_EQ(deviceSetOf(c, pending("alone", 1, 1)).members.size(), 1u);
  TotalsCapacityView totals(c, computeUsage(c));
  HeldAheadView view(c, totals);
  // A member not ordered yet holds the whole set back.
  auto waiting = placeHeldSet(c, view, set);
  EXPECT_FALSE(waiting.node);
  ASSERT_FALSE(waiting.decision.refusals.empty());
  EXPECT_EQ(waiting.decision.refusals[0].code, Code::DeviceUnknown);
  EXPECT_NE(waiting.decision.refusals[0].message.find("not-there"), std::string::npos);
  c.vmis.at("alpha/vm").heldDevices.pop_back();
  set = deviceSetOf(c, c.devices.at("alpha/a"));
  EXPECT_EQ(*placeHeldDevice(c, view, GpuDevice(a)).node, "gpu-2") << "alone it would take gpu-2";
  auto p = placeHeldSet(c, view, set);
  ASSERT_TRUE(p.node) << p.decision.summary();
  EXPECT_EQ(*p.node, "gpu-1");
  // Once a is held there, b is pinned to gpu-1 as well.
  view.hold(a, *p.node);
  auto pb = placeHeldSet(c, view, deviceSetOf(c, c.devices.at("alpha/b")));
  ASSERT_TRUE(pb.node) << pb.decision.summary();
  EXPECT_EQ(*pb.node, "gpu-1");
}

TEST_F(Binder, APinnedSetWaitsWhenItsNodeHasNoRoomAndASplitSetIsRefused) {
  GpuDevice a = device("alpha", "a", "h200", 2, DevicePhase::Bound, "gpu-2");
  GpuDevice b = pending("b", 2, 20);
  put(c, a);
  put(c, b);
  VirtualMachineInstance vm;
  vm.ns = "alpha";
  vm.name = "vm";
  vm.heldDevices = {"a", "b"};
  put(c, vm);
  TotalsCapacityView totals(c, computeUsage(c));
  HeldAheadView view(c, totals);
  auto p = placeHeldSet(c, view, deviceSetOf(c, c.devices.at("alpha/b")));
  EXPECT_FALSE(p.node) << "gpu-1 has room, but the set is on gpu-2";
  ASSERT_FALSE(p.decision.refusals.empty());
  EXPECT_EQ(p.decision.refusals[0].code, Code::NodeInsufficient);
  EXPECT_NE(p.decision.refusals[0].message.find("held on node gpu-2"), std::string::npos)
      << p.decision.refusals[0].message;
  c.devices.at("alpha/b").phase = DevicePhase::Bound;
  c.devices.at("alpha/b").node = "gpu-1";
  GpuDevice late = pending("c", 1, 30);
  put(c, late);
  c.vmis.at("alpha/vm").heldDevices.push_back("c");
  TotalsCapacityView after(c, computeUsage(c));
  HeldAheadView split(c, after);
  auto q = placeHeldSet(c, split, deviceSetOf(c, c.devices.at("alpha/c")));
  EXPECT_FALSE(q.node);
  ASSERT_FALSE(q.decision.refusals.empty());
  EXPECT_EQ(q.decision.refusals[0].code, Code::DeviceUnavailable);
}

}  // namespace
}  // namespace tally::model
