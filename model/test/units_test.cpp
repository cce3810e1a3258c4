#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/units.hpp"

namespace tally::model {
namespace {
using namespace testing;

TEST(UnitsServed, PassthroughNodeServesItsAllocatableFunctions) {
  auto n = gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 8);
  EXPECT_EQ(unitsServed(n, passthroughClass()).units, 8);
  EXPECT_EQ(unitsServed(n, passthroughClass()).devices, 8);
}

TEST(UnitsServed, NodeThatIsNotReadyServesNothing) {
  auto n = gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 8);
  n.ready = false;
  auto u = unitsServed(n, passthroughClass());
  EXPECT_EQ(u.units, 0);
  ASSERT_TRUE(u.notServed);
  EXPECT_EQ(u.notServed->code, Code::NodeNotReady);
}

TEST(UnitsServed, CordonedNodeServesNothing) {
  auto n = gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 8);
  n.unschedulable = true;
  EXPECT_EQ(unitsServed(n, passthroughClass()).notServed->code, Code::NodeCordoned);
}

TEST(UnitsServed, NodeInAnotherModeServesNothing) {
  auto n = gpuNode("gpu-1", NodeMode::PodHami, kH200, 8);
  auto u = unitsServed(n, passthroughClass());
  EXPECT_EQ(u.units, 0);
  EXPECT_EQ(u.notServed->code, Code::NodeWrongMode);
}

TEST(UnitsServed, NodeWhoseActiveModeDiffersFromExpectedServesNothing) {
  auto n = gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 8);
  n.activeMode = NodeMode::PodHami;
  auto u = unitsServed(n, passthroughClass());
  EXPECT_EQ(u.units, 0);
  EXPECT_EQ(u.notServed->code, Code::NodeModeTransition);
}

TEST(UnitsServed, VgpuUsesInventoryCreatedPlusAvailableOfHealthyParents) {
  auto n = gpuNode("vgpu-1", NodeMode::VmVgpu, kA100Vgpu, 99);
  n.inventory =
      std::vector{parent("0000:3b:00.0", true, kA100Vgpu, 4, 1, 3), parent("0000:86:00.0", true, kA100Vgpu, 4, 2, 2)};
  EXPECT_EQ(unitsServed(n, vgpuClass()).units, 8);
}

// The seed's case: one GPU function of the node is unhealthy, but the mdev
// parent's remaining slots still serve a VM.
TEST(UnitsServed, MdevParentSlotsStillServeWhenAnotherFunctionIsUnhealthy) {
  auto n = gpuNode("vgpu-1", NodeMode::VmVgpu, kA100Vgpu, 3);
  n.inventory =
      std::vector{parent("0000:3b:00.0", true, kA100Vgpu, 4, 1, 3), parent("0000:86:00.0", false, kA100Vgpu, 4, 0, 4)};
  auto u = unitsServed(n, vgpuClass());
  EXPECT_EQ(u.units, 4);
  EXPECT_FALSE(u.notServed);
}

TEST(UnitsServed, VgpuWithoutInventoryFallsBackToAllocatable) {
  auto n = gpuNode("vgpu-1", NodeMode::VmVgpu, kA100Vgpu, 6);
  EXPECT_EQ(unitsServed(n, vgpuClass()).units, 6);
}

TEST(UnitsServed, SharedUnitsAreHealthyGpusTimesSharesPerDevice) {
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 20);
  n.inventory =
      std::vector{parent("gpu-0", true, kHamiGpu), parent("gpu-1", true, kHamiGpu), parent("gpu-2", false, kHamiGpu)};
  auto cls = sharedClass("v100-8g", 16384, 8192, 25, 4);  // min(2, 4, 4) = 2
  EXPECT_EQ(sharesPerDevice(cls), 2);
  auto u = unitsServed(n, cls);
  EXPECT_EQ(u.devices, 2);
  EXPECT_EQ(u.units, 4);
}

// REFERENCES: a 2xV100 node advertising 20 nvidia.com/gpu sells 8 shares of an
// 8 GiB/25% product when the device has 32 GiB.
TEST(UnitsServed, SharesPerDeviceIsTheSmallestOfMemoryCoresAndMaxShares) {
  EXPECT_EQ(sharesPerDevice(sharedClass("a", 32768, 8192, 25, 10)), 4);
  EXPECT_EQ(sharesPerDevice(sharedClass("b", 32768, 4096, 25, 10)), 4);
  EXPECT_EQ(sharesPerDevice(sharedClass("c", 32768, 4096, 10, 3)), 3);
  auto n = gpuNode("hami-2", NodeMode::PodHami, kHamiGpu, 20);
  n.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu)};
  EXPECT_EQ(unitsServed(n, sharedClass("a", 32768, 8192, 25, 10)).units, 8);
}

TEST(UnitsServed, SharedNodeWithoutInventoryServesNothingAndSaysWhy) {
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 20);
  auto u = unitsServed(n, sharedClass());
  EXPECT_EQ(u.units, 0);
  EXPECT_EQ(u.notServed->code, Code::NodeNoInventory);
}

// The kubelet admits no more shared pods than the device plugin advertises
// slots, so the node serves 3 of the 4 its GPUs yield, and says so.
TEST(UnitsServed, SharedNodeAdvertisingFewerSlotsThanItsGpusYieldServesTheAdvertisedAndSaysSo) {
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 3);
  n.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu)};
  auto u = unitsServed(n, sharedClass());  // 2 GPUs x min(16384 / 8192, 100 / 25, 4) = 4
  EXPECT_EQ(u.units, 3);
  EXPECT_FALSE(u.notServed);
  EXPECT_NE(u.shortfall.find("node hami-1 advertises 3 nvidia.com/gpu"), std::string::npos) << u.shortfall;
  EXPECT_NE(u.shortfall.find("2 healthy GPU(s) x 2 shares of class v100-8g (4)"), std::string::npos) << u.shortfall;
  EXPECT_TRUE(unitsServed(gpuNode("hami-2", NodeMode::PodHami, kHamiGpu, 20), sharedClass()).shortfall.empty());
}

// The pool's equation names the bound where it counts the node's shares.
TEST(UnitsServed, PoolEquationNamesASharedNodeBoundByItsDevicePlugin) {
  Cluster c = syncedCluster();
  put(c, sharedClass());
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 3);
  n.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu)};
  put(c, n);
  auto inv = evaluateInvariant(c, c.classes.at("v100-8g"));
  ASSERT_EQ(inv.healthy.sources.size(), 1u);
  EXPECT_EQ(inv.healthy.sources[0].quantity, 3);
  EXPECT_NE(inv.healthy.sources[0].note.find("advertises 3 nvidia.com/gpu"), std::string::npos)
      << inv.healthy.sources[0].note;
}

TEST(UnitsServed, SharedClassThatYieldsNoShareOfADeviceSaysWhy) {
  auto n = gpuNode("hami-1", NodeMode::PodHami, kHamiGpu, 20);
  n.inventory = std::vector{parent("g0", true, kHamiGpu)};
  auto u = unitsServed(n, sharedClass("v100-40g", 32768, 40960, 25, 4));
  EXPECT_EQ(u.units, 0);
  ASSERT_TRUE(u.notServed);
  EXPECT_EQ(u.notServed->code, Code::NodeNotServed);
  EXPECT_NE(u.notServed->message.find("class v100-40g sells no shares of a device"), std::string::npos)
      << u.notServed->message;
}

TEST(PoolMembership, SequentialNodeBelongsToThePoolOfItsExpectedModeOnly) {
  auto n = gpuNode("seq-1", NodeMode::PodHami, kH200, 1);
  n.allocatable.set(kHamiGpu, 10);
  n.inventory = std::vector{parent("g0", true, kHamiGpu)};
  n.expectedMode = NodeMode::VmPassthrough;
  EXPECT_TRUE(inPool(n, passthroughClass()));
  EXPECT_FALSE(inPool(n, sharedClass()));
  // While switching, it serves neither pool.
  EXPECT_EQ(unitsServed(n, passthroughClass()).units, 0);
  EXPECT_EQ(unitsServed(n, sharedClass()).units, 0);
}

TEST(PoolMembership, NodeWithoutExpectationUsesItsActiveMode) {
  auto n = gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 2);
  n.expectedMode = NodeMode::Unset;
  EXPECT_TRUE(inPool(n, passthroughClass()));
  EXPECT_EQ(unitsServed(n, passthroughClass()).units, 2);
}

}  // namespace
}  // namespace tally::model
