#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {
using namespace testing;

TEST(EffectiveRequest, SumsAppContainersPlusOverhead) {
  Pod p = gpuPod("t", "p", kHamiGpu, 1);
  p.containers.push_back(ResourceList{{std::string(kHamiGpu), 2}});
  p.overhead.set(kHamiGpu, 1);
  EXPECT_EQ(effectiveRequest(p, kHamiGpu), 4);
}

TEST(EffectiveRequest, LargestRegularInitContainerWinsOverApps) {
  Pod p = gpuPod("t", "p", kHamiGpu, 1);
  p.initContainers.push_back({ResourceList{{std::string(kHamiGpu), 3}}, false});
  EXPECT_EQ(effectiveRequest(p, kHamiGpu), 3);
}

TEST(EffectiveRequest, RestartableSidecarsAddToAppsAndToLaterInitContainers) {
  Pod p = gpuPod("t", "p", kHamiGpu, 1);
  p.initContainers.push_back({ResourceList{{std::string(kHamiGpu), 1}}, true});   // sidecar
  p.initContainers.push_back({ResourceList{{std::string(kHamiGpu), 2}}, false});  // runs beside the sidecar: 3
  EXPECT_EQ(effectiveRequest(p, kHamiGpu), 3);
  p.initContainers.pop_back();
  EXPECT_EQ(effectiveRequest(p, kHamiGpu), 2);  // app 1 + sidecar 1
}

TEST(EffectiveRequest, InitContainerBeforeASidecarDoesNotCountTheSidecar) {
  Pod p = gpuPod("t", "p", kHamiGpu, 0);
  p.initContainers.push_back({ResourceList{{std::string(kHamiGpu), 2}}, false});
  p.initContainers.push_back({ResourceList{{std::string(kHamiGpu), 1}}, true});
  EXPECT_EQ(effectiveRequest(p, kHamiGpu), 2);
}

TEST(PodUsage, TerminalPodsUseNothing) {
  Cluster c = syncedCluster();
  put(c, passthroughClass());
  Pod p = gpuPod("t", "done", kH200, 2, "gpu-1", PodPhase::Succeeded);
  EXPECT_TRUE(podUsage(p, Launch{}, c).capacity.empty());
  p.phase = PodPhase::Failed;
  EXPECT_TRUE(podUsage(p, Launch{}, c).budget.empty());
}

struct VmScenario : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    VirtualMachineInstance vmi;
    vmi.ns = "t";
    vmi.name = "vm";
    vmi.uid = "uid-vm";
    vmi.activePods["uid-launcher"] = "gpu-1";
    put(c, vmi);
    auto d = device("t", "dev", "h200", 2, DevicePhase::Attached, "gpu-1");
    d.attachedTo = {"t", "vm", "uid-vm"};
    put(c, d);
    Pod launcher = gpuPod("t", "launcher", kH200, 2, "gpu-1");
    put(c, launcher);
  }
};

TEST_F(VmScenario, LauncherListedInActivePodsIsCoveredByItsDevices) {
  UsageTotals t = computeUsage(c);
  EXPECT_EQ(t.nodeUsed["gpu-1"].get(kH200), 2);  // the device only, not twice
  EXPECT_EQ(t.namespaceUsed["t"].get(quotaKey(kH200)), 2);
}

// The seed's case: owner references prove nothing; only status.activePods does.
TEST_F(VmScenario, PodWithOwnerReferenceButNotInActivePodsCountsAsRawUsage) {
  Pod impostor = gpuPod("t", "impostor", kH200, 2, "gpu-1");
  impostor.owners.push_back({"VirtualMachineInstance", "vm", "uid-vm", true});
  put(c, impostor);
  UsageTotals t = computeUsage(c);
  EXPECT_EQ(t.nodeUsed["gpu-1"].get(kH200), 4);
  EXPECT_EQ(t.namespaceUsed["t"].get(quotaKey(kH200)), 4);
}

TEST_F(VmScenario, VmiInAnotherNamespaceCannotAdoptAPod) {
  Pod other = gpuPod("other", "launcher", kH200, 2, "gpu-1");
  other.uid = "uid-launcher-2";
  VirtualMachineInstance& vmi = c.vmis.at("t/vm");
  vmi.activePods["uid-launcher-2"] = "gpu-1";
  put(c, other);
  UsageTotals t = computeUsage(c);
  EXPECT_EQ(t.namespaceUsed["other"].get(quotaKey(kH200)), 2);
}

// The seed's case: a Lost device still counts against the budget, but holds no
// node units, so its launcher's request lands on the node as raw usage.
TEST_F(VmScenario, LostDeviceCountsAgainstBudgetButNotNodeCapacity) {
  c.devices.at("t/dev").phase = DevicePhase::Lost;
  UsageTotals t = computeUsage(c);
  EXPECT_EQ(t.namespaceUsed["t"].get(quotaKey(kH200)), 2);  // not 4 (twice) nor 0
  EXPECT_EQ(t.nodeUsed["gpu-1"].get(kH200), 2);             // the launcher's raw usage
  EXPECT_EQ(t.nodeHeld["gpu-1"].get(kH200), 0);
}

TEST_F(VmScenario, CoverageReadersDisagreeExactlyOnLostDevices) {
  c.devices.at("t/dev").phase = DevicePhase::Lost;
  std::vector<const GpuDevice*> attached{&c.devices.at("t/dev")};
  EXPECT_EQ(budgetCoverage(attached, c, kH200), 2);
  EXPECT_EQ(capacityCoverage(attached, c, kH200, "gpu-1"), 0);
}

TEST_F(VmScenario, CapacityCoverageOnlyCountsDevicesOnThePodsNode) {
  std::vector<const GpuDevice*> attached{&c.devices.at("t/dev")};
  EXPECT_EQ(capacityCoverage(attached, c, kH200, "gpu-1"), 2);
  EXPECT_EQ(capacityCoverage(attached, c, kH200, "gpu-2"), 0);
}

TEST_F(VmScenario, HeldDeviceOfAStoppedVmKeepsItsUnits) {
  c.pods.clear();
  c.vmis.at("t/vm").activePods.clear();
  c.devices.at("t/dev").phase = DevicePhase::Bound;
  UsageTotals t = computeUsage(c);
  EXPECT_EQ(t.nodeHeld["gpu-1"].get(kH200), 2);
  EXPECT_EQ(t.nodeUsed["gpu-1"].get(kH200), 2);
}

TEST_F(VmScenario, ReleasedDeviceHoldsNothing) {
  c.pods.clear();
  c.devices.at("t/dev").phase = DevicePhase::Released;
  UsageTotals t = computeUsage(c);
  EXPECT_FALSE(t.nodeUsed.contains("gpu-1"));
  EXPECT_FALSE(t.namespaceUsed.contains("t"));
}

}  // namespace
}  // namespace tally::model
