// The pod doors: the launcher pin decided at CREATE by the owner reference,
// and a raw GPU pod's budgets and pool gates.

#include "tally/model/pod_admission.hpp"

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
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
    p.owners.push_back(OwnerReference{std::string(kVmiOwnerKind), vmiName, vmiUid, true, "kubevirt.io/v1"});
    return p;
  }
  // A pod as created, after every mutation: the checks of the validating door.
  Decision atCreate(const Pod& p, const PlacementPolicy& policy = {}) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkGpuPodAtCreate(c, view, p, policy);
  }
  // A pod the placement door already pointed at tally-scheduler.
  Decision rawPod(Pod p) {
    if (p.schedulerName.empty()) p.schedulerName = "tally-scheduler";
    return atCreate(p);
  }
  CreateRoute route(const Pod& p, const PlacementPolicy& policy = {}) {
    TotalsCapacityView view(c, computeUsage(c));
    CreateLaunch launch = launchAtCreate(c, p);
    EXPECT_TRUE(launch.decision.allowed()) << launch.decision.summary();
    return routeAtCreate(c, view, podDemandAtCreate(c, view, p, launch), policy);
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

// --- Placement: no GPU unit reaches a node without Tally's decision ---------

TEST_F(PodDoors, GpuPodNamingAnotherSchedulerIsRefusedNamingTallysProfile) {
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  p.schedulerName = "default-scheduler";
  Decision d = atCreate(p);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.back().code, Code::SchedulerBypass);
  EXPECT_NE(d.summary().find("names scheduler default-scheduler"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("scheduler tally-scheduler"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("1 " + std::string(kH200)), std::string::npos) << d.summary();
}

TEST_F(PodDoors, EveryProfileOfThePolicyPlacesThroughTally) {
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  p.schedulerName = "tally-batch";
  EXPECT_FALSE(atCreate(p).allowed());
  EXPECT_TRUE(atCreate(p, PlacementPolicy{{"tally-scheduler", "tally-batch"}}).allowed());
  EXPECT_FALSE(atCreate(p, PlacementPolicy{{}}).allowed()) << "no Tally profile: nothing may place GPU pods";
}

TEST_F(PodDoors, PresetNodeOnAFullNodeIsRefusedNamingTheNodeAndItsFreeUnits) {
  put(c, gpuPod("acme-ml", "busy", kH200, 2, "gpu-2", PodPhase::Running));
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "gpu-2", PodPhase::Pending);
  p.uid.clear();
  Decision d = atCreate(p);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::NodeInsufficient);
  EXPECT_NE(d.summary().find("names node gpu-2"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("0 of 2 " + std::string(kH200) + " free"), std::string::npos) << d.summary();
  // The mutating door refuses it as well, before it could move the node anywhere.
  TotalsCapacityView view(c, computeUsage(c));
  CreateRoute r = routeAtCreate(c, view, podDemand(c, view, p), {});
  EXPECT_FALSE(r.decision.allowed());
  EXPECT_FALSE(r.pinnedNode);
}

TEST_F(PodDoors, PresetNodeHeldByABoundDeviceIsRefused) {
  put(c, ::tally::model::testing::device("acme-ml", "held", "h200", 2, DevicePhase::Bound, "gpu-2"));
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "gpu-2", PodPhase::Pending);
  p.uid.clear();
  Decision d = atCreate(p);
  ASSERT_FALSE(d.allowed());
  EXPECT_NE(d.summary().find("2 held by GPUDevices"), std::string::npos) << d.summary();
}

TEST_F(PodDoors, PresetUnknownNodeIsRefused) {
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "gpu-9", PodPhase::Pending);
  Decision d = atCreate(p);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::NodeGone);
  EXPECT_NE(d.summary().find("gpu-9"), std::string::npos);
}

TEST_F(PodDoors, PresetNodeWithRoomIsMovedIntoAnAffinityAndTallysScheduler) {
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "gpu-1", PodPhase::Pending);
  p.uid.clear();
  p.schedulerName = "default-scheduler";
  CreateRoute r = route(p);
  ASSERT_TRUE(r.decision.allowed()) << r.decision.summary();
  EXPECT_EQ(r.pinnedNode, "gpu-1");
  EXPECT_EQ(r.scheduler, "tally-scheduler");
}

TEST_F(PodDoors, PodAlreadyOnTallysSchedulerIsNotRouted) {
  Pod p = gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending);
  p.schedulerName = "tally-scheduler";
  CreateRoute r = route(p);
  EXPECT_TRUE(r.decision.allowed());
  EXPECT_FALSE(r.scheduler);
  EXPECT_FALSE(r.pinnedNode);
}

// --- Owner references proven, not trusted -----------------------------------

TEST_F(PodDoors, AVmiOwnerOutsideKubevirtIsNoOwner) {
  vmi("train", "vmi-1");
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  Pod forged = launcherPod("train", "vmi-1");
  forged.owners.front().apiVersion = "x.io/v1";
  EXPECT_FALSE(namesVmiOwner(forged));
  EXPECT_FALSE(launchAtCreate(c, forged).launch.vmi);
  EXPECT_FALSE(launcherPin(c, forged).node) << "a forged owner is not pinned to another VMI's devices either";
}

TEST_F(PodDoors, ForgedVmiOwnerIsChargedAsARawPod) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 1));
  Pod forged = launcherPod("train", "vmi-1");
  forged.owners.front().apiVersion = "x.io/v1";
  forged.containers.front() = ResourceList{{std::string(kH200), 2}};
  forged.schedulerName = "tally-scheduler";
  Decision d = atCreate(forged);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::BudgetExceeded) << d.summary();
}

// A licensed class sells its units to entitled tenants only, whichever door
// asks: a raw pod is no way around the GPUDevice and claim doors' rule.
TEST_F(PodDoors, RawPodOfALicensedClassNeedsTheEntitlement) {
  c.classes.at("h200").requiresEntitlement = true;
  Decision d = rawPod(gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending));
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::NotEntitled) << d.summary();
  EXPECT_NE(d.refusals.front().message.find("pod acme-ml/p: namespace acme-ml is not entitled to licensed class h200"),
            std::string::npos)
      << d.summary();
  EXPECT_NE(d.refusals.front().message.find("gpu.tally.dev/entitled-h200"), std::string::npos) << d.summary();
  // Entitled on an ancestor: admitted.
  c.namespaces.at("acme").entitledClasses.push_back("h200");
  EXPECT_TRUE(rawPod(gpuPod("acme-ml", "p", kH200, 1, "", PodPhase::Pending)).allowed());
}

TEST_F(PodDoors, LauncherOfALicensedClassIsCoveredByItsVmisDevices) {
  c.classes.at("h200").requiresEntitlement = true;
  vmi("train", "vmi-1");
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  Pod launcher = launcherPod("train", "vmi-1");
  launcher.schedulerName = "tally-scheduler";
  // Its GPU was ordered (and the entitlement checked) at the device door.
  EXPECT_TRUE(atCreate(launcher).allowed()) << atCreate(launcher).summary();
}

TEST_F(PodDoors, LauncherIsChargedOnlyBeyondItsVmisDevices) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 2));
  vmi("train", "vmi-1");
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  attach("g1", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  Pod launcher = launcherPod("train", "vmi-1");
  launcher.containers.front() = ResourceList{{std::string(kH200), 2}};
  launcher.schedulerName = "tally-scheduler";
  EXPECT_TRUE(atCreate(launcher).allowed()) << atCreate(launcher).summary();
  // One more GPU than its devices: the budget, already spent on them, refuses it.
  launcher.containers.front() = ResourceList{{std::string(kH200), 3}};
  Decision d = atCreate(launcher);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::BudgetExceeded) << d.summary();
}

TEST_F(PodDoors, OwnerNamingAVmiThatDoesNotExistIsRefusedAtCreate) {
  Pod p = launcherPod("ghost", "vmi-none");
  p.schedulerName = "tally-scheduler";
  Decision d = atCreate(p);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::CacheNotSynced);
  EXPECT_NE(d.summary().find("cannot be proven"), std::string::npos) << d.summary();
}

TEST_F(PodDoors, OwnerVmiThatHasEndedCoversNothing) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 2));
  VirtualMachineInstance done = vmi("train", "vmi-1");
  done.phase = "Succeeded";
  put(c, done);
  attach("g0", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  attach("g1", "train", "vmi-1", DevicePhase::Attached, "gpu-2");
  EXPECT_FALSE(launchAtCreate(c, launcherPod("train", "vmi-1")).launch.vmi);
}

}  // namespace
}  // namespace tally::model
