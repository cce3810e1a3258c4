// The pod doors: the launcher pin decided at CREATE by the owner reference,
// and a raw GPU pod's budgets and pool gates.

#include "tally/model/pod_admission.hpp"

#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {

using namespace testing;

struct PodDoors : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 2));
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, org("acme"));
  }
  VirtualMachineInstance vmi(const std::string& name, const std::string& uid) {
    VirtualMachineInstance v;
    v.ns = "acme-ml";
    v.name = name;
    v.uid = uid;
    put(c, v);
    return v;
  }
  void attach(const std::string& device, const std::string& vmiName, const std::string& vmiUid, DevicePhase phase,
              const std::string& node) {
    GpuDevice d = ::tally::model::testing::device("acme-ml", device, "h200", 1, phase, node);
    d.attachedTo = ObjectRef{"acme-ml", vmiName, vmiUid};
    put(c, d);
  }
  static Pod launcherPod(const std::string& vmiName, const std::string& vmiUid) {
    Pod p = gpuPod("acme-ml", "virt-launcher-" + vmiName, kH200, 1, "", PodPhase::Pending);
    p.uid.clear();  // at CREATE
    p.owners.push_back(OwnerReference{std::string(kVmiOwnerKind), vmiName, vmiUid, true});
    return p;
  }
  Decision rawPod(const Pod& p) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkRawGpuPod(c, view, p);
  }
};

TEST_F(PodDoors, LauncherOfAVmiWithPlacedDevicesIsPinnedToTheirNode) {
  vmi("train", "vmi-1");
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  attach("g1", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  LauncherPin pin = launcherPin(c, launcherPod("train", "vmi-1"));
  ASSERT_TRUE(pin.decision.allowed()) << pin.decision.summary();
  EXPECT_EQ(pin.node, "gpu-2");
}

TEST_F(PodDoors, PodWithoutAVmiOwnerIsNotPinned) {
  LauncherPin pin = launcherPin(c, gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending));
  EXPECT_TRUE(pin.decision.allowed());
  EXPECT_FALSE(pin.node);
}

TEST_F(PodDoors, LauncherOfAVmiWithoutDevicesIsNotPinned) {
  vmi("plain", "vmi-2");
  LauncherPin pin = launcherPin(c, launcherPod("plain", "vmi-2"));
  EXPECT_TRUE(pin.decision.allowed()) << pin.decision.summary();
  EXPECT_FALSE(pin.node);
}

TEST_F(PodDoors, OwnerVmiNotSeenYetIsRefusedNamingItAndTheRetry) {
  LauncherPin pin = launcherPin(c, launcherPod("train", "vmi-9"));
  ASSERT_FALSE(pin.decision.allowed());
  const std::string& message = pin.decision.refusals.front().message;
  EXPECT_NE(message.find("vmi/acme-ml/train (uid vmi-9)"), std::string::npos) << message;
  EXPECT_NE(message.find("not seen yet"), std::string::npos) << message;
  EXPECT_NE(message.find("retries"), std::string::npos) << message;
}

TEST_F(PodDoors, OwnerReferenceIsMatchedByUidNotByName) {
  vmi("train", "vmi-new");
  attach("g0", "train", "vmi-new", DevicePhase::Attached, "gpu-1");
  EXPECT_FALSE(launcherPin(c, launcherPod("train", "vmi-old")).decision.allowed());
}

TEST_F(PodDoors, DevicesNotYetPlacedRefuseThePin) {
  vmi("train", "vmi-1");
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-1");
  attach("g1", "train", "vmi-1", DevicePhase::Pending, "");
  LauncherPin pin = launcherPin(c, launcherPod("train", "vmi-1"));
  ASSERT_FALSE(pin.decision.allowed());
  EXPECT_EQ(pin.decision.refusals.front().code, Code::DeviceUnavailable);
  EXPECT_FALSE(pin.node);
}

TEST_F(PodDoors, UnsyncedVmiCacheRefusesThePin) {
  c.caches[Kind::VirtualMachineInstance].synced = false;
  LauncherPin pin = launcherPin(c, launcherPod("train", "vmi-1"));
  ASSERT_FALSE(pin.decision.allowed());
  EXPECT_EQ(pin.decision.refusals.front().code, Code::CacheNotSynced);
}

TEST_F(PodDoors, RawPodInAClosedPoolIsRefusedWithTheGate) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "audit-7";
  Decision d = rawPod(gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::GateClosed);
  EXPECT_NE(d.refusals.front().message.find("audit-7"), std::string::npos) << d.summary();
  EXPECT_NE(d.refusals.front().message.find("pod acme-ml/p"), std::string::npos) << d.summary();
}

TEST_F(PodDoors, RawPodIsAdmittedWhileAnotherPoolSellingItsResourceIsOpen) {
  c.classes.at("h200").gateOpen = false;
  DeviceClass twin = passthroughClass("h200-b");
  put(c, twin);
  EXPECT_TRUE(rawPod(gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending)).allowed());
}

TEST_F(PodDoors, RawPodOverABudgetIsRefusedLikeCheckPodBudget) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 1));
  Decision d = rawPod(gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::BudgetExceeded);
}

TEST_F(PodDoors, RawPodWithinBudgetInAnOpenPoolIsAdmitted) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 2));
  EXPECT_TRUE(rawPod(gpuPod("acme-ml", "p", kH200, 2, "", PodPhase::Pending)).allowed());
}

}  // namespace
}  // namespace tally::model
