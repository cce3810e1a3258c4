#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/fit_table.hpp"
#include "tally/model/index.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct IndexedCluster : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
  }
};

TEST_F(IndexedCluster, CopyWithoutPodsKeepsEveryOtherObject) {
  put(c, gpuPod("acme-ml", "p", kH200, 1, "gpu-1"));
  put(c, device("acme-ml", "dev", "h200", 2, DevicePhase::Bound, "gpu-2"));
  put(c, hrq("acme", "budget", "requests.nvidia.com/h200", 4));
  put(c, org("acme"));
  c.alerts.emplace_back();
  const Cluster copy = c.withoutPods();
  EXPECT_TRUE(copy.pods.empty());
  EXPECT_EQ(copy.now, c.now);
  EXPECT_EQ(copy.nodes.size(), 2u);
  EXPECT_EQ(copy.classes.size(), 1u);
  EXPECT_EQ(copy.namespaces.size(), 2u);
  EXPECT_EQ(copy.devices.size(), 1u);
  EXPECT_EQ(copy.hrqs.size(), 1u);
  EXPECT_EQ(copy.organizations.size(), 1u);
  EXPECT_EQ(copy.alerts.size(), 1u);
  EXPECT_EQ(copy.caches.size(), c.caches.size());
  EXPECT_TRUE(copy.synced(Kind::GpuDevice));
  EXPECT_EQ(c.pods.size(), 1u);  // the original keeps its pods
}

TEST_F(IndexedCluster, LauncherBecomesCoveredWhenKubeVirtListsIt) {
  auto index = UsageIndex::fromCluster(c);
  auto d = device("acme-ml", "dev", "h200", 2, DevicePhase::Attached, "gpu-1");
  d.attachedTo = {"acme-ml", "vm", "uid-vm"};
  index.upsertDevice(d);
  index.upsertPod(gpuPod("acme-ml", "launcher", kH200, 2, "gpu-1"));
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 4);  // not a launcher yet: raw usage
  VirtualMachineInstance vmi;
  vmi.ns = "acme-ml";
  vmi.name = "vm";
  vmi.uid = "uid-vm";
  vmi.activePods["uid-launcher"] = "gpu-1";
  index.upsertVmi(vmi);
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 2);
  EXPECT_EQ(index.subtreeUsed("acme", quotaKey(kH200)), 2);
  EXPECT_EQ(index.totals(), computeUsage(index.cluster()));
  index.removeVmi("acme-ml", "vm");
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 4);
  EXPECT_EQ(index.totals(), computeUsage(index.cluster()));
}

TEST_F(IndexedCluster, PoolFreeUnitsFollowEveryEvent) {
  auto index = UsageIndex::fromCluster(c);
  const auto& cls = index.cluster().classes.at("h200");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), cls), 8);
  index.upsertDevice(device("acme", "held", "h200", 3, DevicePhase::Bound, "gpu-2"));
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), cls), 5);
  auto cordoned = c.nodes.at("gpu-1");
  cordoned.unschedulable = true;
  index.upsertNode(cordoned);
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), cls), 1);
  index.removeDevice("acme", "held");
  EXPECT_EQ(index.poolFreeUnits(index.cluster(), cls), 4);
}

// A noted copy of the index's cluster (the writer's published base, with the
// doors' gates) is answered from the running sums, and they agree with a walk
// over the copy's nodes; a cluster that is not noted is still walked.
TEST_F(IndexedCluster, PoolFreeUnitsOfANotedCopyComeFromTheRunningSums) {
  auto index = UsageIndex::fromCluster(c);
  index.upsertDevice(device("acme", "held", "h200", 3, DevicePhase::Bound, "gpu-2"));
  const Cluster copy = index.cluster().withoutPods();
  const auto& cls = copy.classes.at("h200");
  const std::int64_t walked = index.CapacityView::poolFreeUnits(copy, cls);
  EXPECT_EQ(walked, 5);
  index.noteClusterCopy(&copy);
  EXPECT_EQ(index.poolFreeUnits(copy, cls), walked);
  // The sums move with the index; the copy is answered as of the index now
  // (as a published snapshot lags its index until the next publish).
  index.removeDevice("acme", "held");
  EXPECT_EQ(index.poolFreeUnits(copy, cls), 8);
  Cluster other = copy;
  EXPECT_EQ(index.poolFreeUnits(other, cls), 8);  // walked: nothing of `other` is held by the index's sums
  other.nodes.erase("gpu-1");
  EXPECT_EQ(index.poolFreeUnits(other, cls), 4) << "a cluster that is not noted must be walked";
  index.noteClusterCopy(nullptr);
  EXPECT_EQ(index.poolFreeUnits(copy, cls), 8);
}

TEST_F(IndexedCluster, NamespaceRelabelMovesBudgetToTheNewAncestors) {
  auto index = UsageIndex::fromCluster(c);
  index.upsertPod(gpuPod("acme-ml", "p", kH200, 2, "gpu-1"));
  EXPECT_EQ(index.subtreeUsed("acme", quotaKey(kH200)), 2);
  index.upsertNamespace(ns("acme-ml", {"beta"}));
  EXPECT_EQ(index.subtreeUsed("acme", quotaKey(kH200)), 0);
  EXPECT_EQ(index.subtreeUsed("beta", quotaKey(kH200)), 2);
}

TEST_F(IndexedCluster, BindingAPodDropsItsAssumption) {
  auto index = UsageIndex::fromCluster(c);
  auto pod = gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending);
  index.upsertPod(pod);
  index.assume(pod, "gpu-1");
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 2);
  pod.nodeName = "gpu-1";
  index.upsertPod(pod);
  EXPECT_EQ(index.assumedCount(), 0u);
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 2);  // now from the pod itself, once
}

TEST_F(IndexedCluster, SnapshotAnswersLikeTheIndexAndStaysFrozen) {
  auto index = UsageIndex::fromCluster(c);
  auto pending = gpuPod("acme-ml", "pending", kH200, 1, "", PodPhase::Pending);
  index.upsertPod(pending);
  index.upsertPod(gpuPod("acme-ml", "running", kH200, 2, "gpu-1"));
  index.assume(gpuPod("acme-ml", "assumed", kH200, 1, "", PodPhase::Pending), "gpu-2");
  UsageSnapshot snap = index.snapshot();
  const auto& cls = index.cluster().classes.at("h200");
  EXPECT_EQ(snap.nodeUsed("gpu-1", kH200), index.nodeUsed("gpu-1", kH200));
  EXPECT_EQ(snap.nodeUsed("gpu-2", kH200), 1);
  EXPECT_EQ(snap.subtreeUsed("acme", quotaKey(kH200)), index.subtreeUsed("acme", quotaKey(kH200)));
  EXPECT_EQ(snap.poolFreeUnits(index.cluster(), cls), index.poolFreeUnits(index.cluster(), cls));
  EXPECT_TRUE(snap.counts(pending));
  auto stranger = pending;
  stranger.uid = "other";
  EXPECT_FALSE(snap.counts(stranger));
  index.upsertPod(gpuPod("acme-ml", "late", kH200, 1, "gpu-1"));
  EXPECT_EQ(snap.nodeUsed("gpu-1", kH200), 2);
  EXPECT_EQ(index.nodeUsed("gpu-1", kH200), 3);
}

TEST_F(IndexedCluster, FilterOnAnIndexAgreesWithFilterOnRecomputedTotals) {
  put(c, device("acme", "held", "h200", 3, DevicePhase::Bound, "gpu-2"));
  put(c, gpuPod("acme-ml", "running", kH200, 2, "gpu-1"));
  auto index = UsageIndex::fromCluster(c);
  TotalsCapacityView totals(c, computeUsage(c));
  auto pod = gpuPod("acme-ml", "new", kH200, 2, "", PodPhase::Pending);
  auto fromIndex = podDemand(index.cluster(), index, pod);
  auto fromTotals = podDemand(c, totals, pod);
  for (const auto& name : {"gpu-1", "gpu-2"}) {
    EXPECT_EQ(filterNode(index.cluster(), index, fromIndex, index.cluster().nodes.at(name)).verdict,
              filterNode(c, totals, fromTotals, c.nodes.at(name)).verdict)
        << name;
  }
}

}  // namespace
}  // namespace tally::model

namespace tally::model {
namespace {
using namespace testing;

TEST_F(IndexedCluster, FitTableAgreesWithFilterNodeOnEveryNode) {
  put(c, sharedClass());
  auto hami = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 8);
  hami.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu)};
  put(c, hami);
  put(c, gpuNode("hami-bare", NodeMode::PodHami, kHamiGpu, 8));
  auto cordoned = gpuNode("gpu-3", NodeMode::VmPassthrough, kH200, 8);
  cordoned.unschedulable = true;
  put(c, cordoned);
  put(c, device("acme", "held", "h200", 3, DevicePhase::Bound, "gpu-2"));
  put(c, gpuPod("acme-ml", "running", kH200, 2, "gpu-1"));
  auto index = UsageIndex::fromCluster(c);
  auto table = FitTable::build(index.cluster(), index);
  ASSERT_EQ(table.size(), index.cluster().nodes.size());
  for (const auto& pod : {gpuPod("acme-ml", "a", kH200, 2, "", PodPhase::Pending),
                          gpuPod("acme-ml", "b", kHamiGpu, 1, "", PodPhase::Pending),
                          gpuPod("acme-ml", "c", kH200, 5, "", PodPhase::Pending)}) {
    auto demand = podDemand(index.cluster(), index, pod);
    for (const auto& [name, node] : index.cluster().nodes) {
      auto row = table.find(name);
      ASSERT_TRUE(row);
      auto fast = table.filter(index.cluster(), demand, *row);
      auto slow = filterNode(index.cluster(), index, demand, node);
      EXPECT_EQ(fast.verdict, slow.verdict) << pod.name << " on " << name;
      EXPECT_EQ(fast.reason, slow.reason) << pod.name << " on " << name;
    }
  }
  EXPECT_FALSE(table.find("no-such-node"));
}

}  // namespace
}  // namespace tally::model
