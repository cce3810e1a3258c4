// The binder's rules: placement of admitted orders in arrival order, placements
// held ahead of the watch, Lost and recovery.

#include <gtest/gtest.h>

#include "fixtures.hpp"
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

}  // namespace
}  // namespace tally::model
