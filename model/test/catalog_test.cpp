#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/catalog.hpp"
#include "tally/model/index.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct Catalog : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, vgpuClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 2));
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, org("acme"));
  }
  CatalogOptions options(std::string nsName = "acme-ml") {
    TotalsCapacityView view(c, computeUsage(c));
    return catalogOptions(c, view, nsName);
  }
  ClassOption option(const std::string& cls, std::string nsName = "acme-ml") {
    auto all = options(nsName);
    const ClassOption* o = findOption(all, cls);
    EXPECT_NE(o, nullptr) << cls;
    return o ? *o : ClassOption{};
  }
  bool admits(std::int64_t count, std::string cls = "h200", std::string nsName = "acme-ml") {
    TotalsCapacityView view(c, computeUsage(c));
    return checkDeviceOrder(c, view, catalogOrder(nsName, cls, count)).allowed();
  }
};

TEST_F(Catalog, ListsEveryClassOrderableOrNot) {
  auto all = options();
  ASSERT_EQ(all.classes.size(), 2u);
  EXPECT_EQ(all.ns, "acme-ml");
  EXPECT_TRUE(findOption(all, "h200")->orderable);
  // No node serves the vGPU class: listed, with the door's reason.
  const ClassOption* vgpu = findOption(all, "a100-10c");
  ASSERT_NE(vgpu, nullptr);
  EXPECT_FALSE(vgpu->orderable);
  EXPECT_EQ(vgpu->largestCount, 0);
  ASSERT_FALSE(vgpu->refusals.empty());
  EXPECT_EQ(vgpu->refusals.front().code, Code::PoolInsufficient);
}

TEST_F(Catalog, LargestCountIsWhatOneNodeHoldsWhole) {
  // 6 free in the pool, at most 4 on one node: the door admits 4, not 5.
  ClassOption h = option("h200");
  EXPECT_EQ(h.largestCount, 4);
  EXPECT_TRUE(admits(4));
  EXPECT_FALSE(admits(5));
  ASSERT_FALSE(h.refusals.empty());
  EXPECT_EQ(h.refusals.front().code, Code::NoSingleNode);
}

TEST_F(Catalog, AncestorBudgetLimitsTheCount) {
  put(c, hrq("acme", "plan-quota", key, 3));
  put(c, device("acme", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  ClassOption h = option("h200");
  EXPECT_EQ(h.largestCount, 2);
  EXPECT_TRUE(admits(2));
  EXPECT_FALSE(admits(3));
  EXPECT_EQ(h.refusals.front().code, Code::BudgetExceeded);
  EXPECT_NE(h.refusals.front().message.find("acme/plan-quota"), std::string::npos) << h.refusals.front().message;
}

TEST_F(Catalog, MaxCountCapsTheLargestCount) {
  c.classes.at("h200").maxCount = 2;
  ClassOption h = option("h200");
  EXPECT_TRUE(h.orderable);
  EXPECT_EQ(h.largestCount, 2);
  EXPECT_TRUE(h.refusals.empty());  // nothing below maxCount stops a larger order
}

TEST_F(Catalog, UnreadableBudgetMakesTheClassUnorderableWithThatReason) {
  c.caches[Kind::HierarchicalResourceQuota].synced = false;
  auto all = options();
  ASSERT_EQ(all.classes.size(), 2u);  // never skipped
  ClassOption h = option("h200");
  EXPECT_FALSE(h.orderable);
  ASSERT_FALSE(h.refusals.empty());
  bool unknown = false;
  for (const auto& r : h.refusals) unknown = unknown || r.code == Code::BudgetUnknown;
  EXPECT_TRUE(unknown);
}

TEST_F(Catalog, UnknownNamespaceIsUnorderableEverywhere) {
  for (const auto& o : options("nowhere").classes) {
    EXPECT_FALSE(o.orderable) << o.className;
    bool named = false;
    for (const auto& r : o.refusals) named = named || r.code == Code::NamespaceUnknown;
    EXPECT_TRUE(named) << o.className;
  }
}

TEST_F(Catalog, LicensedClassWithoutEntitlementGivesTheReason) {
  c.classes.at("h200").requiresEntitlement = true;
  ClassOption h = option("h200");
  EXPECT_FALSE(h.orderable);
  EXPECT_EQ(h.refusals.front().code, Code::NotEntitled);
  c.namespaces.at("acme").entitledClasses.push_back("h200");
  EXPECT_TRUE(option("h200").orderable);
}

TEST_F(Catalog, ClosedGateMakesTheClassUnorderable) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateReason = "paused by the operator";
  ClassOption h = option("h200");
  EXPECT_FALSE(h.orderable);
  bool gate = false;
  for (const auto& r : h.refusals) gate = gate || r.code == Code::GateClosed;
  EXPECT_TRUE(gate);
}

TEST_F(Catalog, AgreesWithTheDoorForEveryCount) {
  put(c, hrq("acme", "plan-quota", key, 5));
  put(c, device("acme-ml", "held", "h200", 2, DevicePhase::Bound, "gpu-1"));
  for (const auto& o : options().classes) {
    for (std::int64_t n = 1; n <= o.maxCount + 1; ++n) {
      EXPECT_EQ(n <= o.largestCount, admits(n, o.className)) << o.className << " x" << n;
    }
  }
}

TEST(Remedy, EveryFindingCodeHasOne) {
  for (int i = 0; i <= static_cast<int>(FindingCode::SharedNodeWithoutInventory); ++i) {
    auto code = static_cast<FindingCode>(i);
    EXPECT_NE(remedy(code), "see the finding's message") << toString(code);
    EXPECT_GT(remedy(code).size(), 20u) << toString(code);
  }
}

}  // namespace
}  // namespace tally::model
