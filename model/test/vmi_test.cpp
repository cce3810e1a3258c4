// The VM door's rules: a VMI's device references checked before any write,
// the one node of its set, the devices attached to it, and what becomes of an
// attachment once its VMI exists, never appears, or is gone.

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/usage.hpp"
#include "tally/model/placement.hpp"
#include "tally/model/vmi.hpp"

namespace tally::model {
namespace {

using namespace testing;

constexpr Timestamp kBound = 30;

bool has(const Decision& d, Code code) {
  for (const auto& r : d.refusals) {
    if (r.code == code) return true;
  }
  return false;
}

class VmDoor : public ::testing::Test {
 protected:
  void SetUp() override {
    c = syncedCluster();
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 2));
    put(c, ns("alpha"));
    c.permittedHostDevices = std::vector<PermittedHostDevice>{{std::string(kH200), "10DE:2335", false, true}};
  }
  VirtualMachineInstance vmi(std::string name, std::vector<std::string> held,
                             std::vector<DeviceTemplate> templates = {}) {
    VirtualMachineInstance v;
    v.ns = "alpha";
    v.name = std::move(name);
    v.heldDevices = std::move(held);
    v.deviceTemplates = std::move(templates);
    return v;
  }
  VmiStart plan(const VirtualMachineInstance& v, std::string_view token = "tok12345abcd") {
    totals = std::make_unique<TotalsCapacityView>(c, computeUsage(c));
    return planVmiStart(c, *totals, v, token, {c.now, kBound});
  }
  GpuDevice attachedTo(GpuDevice d, std::string vmiName, std::string uid, std::string token, Timestamp since) {
    d.attachedTo = ObjectRef{"alpha", std::move(vmiName), std::move(uid)};
    d.attachToken = std::move(token);
    d.attachedAt = since;
    d.attachSet = {d.name};
    if (holdsNodeUnits(d)) d.phase = DevicePhase::Attached;
    return d;
  }
  Cluster c;
  std::unique_ptr<TotalsCapacityView> totals;
};

TEST_F(VmDoor, AClosedGateRefusesAStartOnHeldDevicesOnly) {
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  ASSERT_TRUE(plan(vmi("vm", {"held"})).decision.allowed());
  DeviceClass cls = c.classes.at("h200");
  cls.gateOpen = false;
  cls.gateFailureId = "h200-0badf00d-100";
  put(c, cls);
  VmiStart s = plan(vmi("vm", {"held"}));
  ASSERT_FALSE(s.decision.allowed());
  ASSERT_TRUE(has(s.decision, Code::GateClosed)) << s.decision.summary();
  EXPECT_NE(s.decision.summary().find("h200-0badf00d-100"), std::string::npos) << s.decision.summary();
  // The held device itself is untouched by the refusal: nothing to attach or create.
  EXPECT_TRUE(s.create.empty());
}

TEST_F(VmDoor, AHeldDeviceAndATemplateGoToTheHeldDevicesNode) {
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 1}}));
  ASSERT_TRUE(s.decision.allowed()) << s.decision.summary();
  ASSERT_TRUE(s.node);
  EXPECT_EQ(*s.node, "gpu-2");
  EXPECT_EQ(s.attach, std::vector<std::string>{"held"});
  ASSERT_EQ(s.create.size(), 1u);
  EXPECT_EQ(s.create[0].name, templateDeviceName("vm", "tok12345abcd", 0));
  EXPECT_EQ(s.set, (std::vector<std::string>{"held", s.create[0].name}));
  // One gpus entry per GPU, the class's resource name each.
  ASSERT_EQ(s.gpus.size(), 2u);
  for (const auto& g : s.gpus) EXPECT_EQ(g.deviceName, kH200);
}

// The binder put the held device into the last free units of gpu-2; the set
// (it and a template of 2) fits on gpu-1: the held device, attached to no VM,
// moves there with the set rather than the start being refused.
TEST_F(VmDoor, ASetTooBigForTheHeldDevicesNodeMovesTheHeldDeviceWhereTheWholeSetFits) {
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  put(c, hrq("alpha", "plan-quota", quotaKey(kH200), 3));  // the held GPU counts once: 1 + 2 = 3
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 2}}));
  ASSERT_TRUE(s.decision.allowed()) << s.decision.summary();
  ASSERT_TRUE(s.node);
  EXPECT_EQ(*s.node, "gpu-1");
  EXPECT_EQ(s.attach, std::vector<std::string>{"held"});
  EXPECT_EQ(s.move, std::vector<std::string>{"held"});
  EXPECT_EQ(s.gpus.size(), 3u);
  // Written as the door writes it: unplaced with its attachment, for the binder.
  const GpuDevice moved = attachedBy(unplaced(c.devices.at("alpha/held")), "alpha", "vm", "tok12345abcd", s.set, 5);
  EXPECT_EQ(moved.phase, DevicePhase::Pending);
  EXPECT_TRUE(moved.node.empty());
  EXPECT_EQ(moved.attachToken, "tok12345abcd");
  // Where the set fits beside it, nothing moves.
  EXPECT_TRUE(plan(vmi("vm", {"held"}, {{"h200", 1}})).move.empty());
}

TEST_F(VmDoor, AHeldDeviceIsNotMovedWhenNoNodeHoldsTheWholeSet) {
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 4}}));  // 5: more than any node
  EXPECT_TRUE(has(s.decision, Code::NodeInsufficient)) << s.decision.summary();
  EXPECT_NE(s.decision.summary().find("gpu-2"), std::string::npos) << s.decision.summary();
  EXPECT_TRUE(s.move.empty());
  EXPECT_TRUE(s.gpus.empty());
}

// A device already attached (here to this VMI, by an earlier call of the same
// create) stays where it is: only a held device no VM runs on moves.
TEST_F(VmDoor, AnAttachedHeldDeviceIsNeverMoved) {
  put(c, attachedTo(device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"), "vm", "", "tok12345abcd", c.now));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 2}}));
  EXPECT_TRUE(has(s.decision, Code::NodeInsufficient)) << s.decision.summary();
  EXPECT_TRUE(s.move.empty());
}

TEST_F(VmDoor, ASetNoSingleNodeCanHoldIsRefused) {
  // 6 free units in the pool, but 4 and 2: a set of 5 fits on none.
  VmiStart s = plan(vmi("vm", {}, {{"h200", 3}, {"h200", 2}}));
  EXPECT_FALSE(s.decision.allowed());
  EXPECT_TRUE(has(s.decision, Code::NoSingleNode) || has(s.decision, Code::CountAboveMax)) << s.decision.summary();
}

TEST_F(VmDoor, UnplacedHeldDevicesAndTemplatesArePlacedTogether) {
  put(c, device("alpha", "held", "h200", 2, DevicePhase::Pending));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 2}}));
  ASSERT_TRUE(s.decision.allowed()) << s.decision.summary();
  ASSERT_TRUE(s.node);
  EXPECT_EQ(*s.node, "gpu-1");  // only gpu-1 holds 4
}

TEST_F(VmDoor, APendingHeldDeviceIsNotChargedTwiceAgainstTheBudget) {
  put(c, hrq("alpha", "plan-quota", budgetKeyFor(std::string(kH200)), 3));
  put(c, device("alpha", "held", "h200", 2, DevicePhase::Pending));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 1}}));
  EXPECT_TRUE(s.decision.allowed()) << s.decision.summary();
  // One more would be 4 > 3.
  VmiStart over = plan(vmi("vm", {"held"}, {{"h200", 2}}));
  EXPECT_TRUE(has(over.decision, Code::BudgetExceeded)) << over.decision.summary();
}

TEST_F(VmDoor, HeldDevicesMustExistInTheVmisNamespaceAndBeUsable) {
  put(c, ns("beta"));
  put(c, device("beta", "theirs", "h200", 1, DevicePhase::Bound, "gpu-1"));
  put(c, device("alpha", "lost", "h200", 1, DevicePhase::Lost, "gpu-1"));
  GpuDevice going = device("alpha", "going", "h200", 1, DevicePhase::Bound, "gpu-1");
  going.deleting = true;
  put(c, going);
  VmiStart s = plan(vmi("vm", {"theirs", "lost", "going"}));
  ASSERT_EQ(s.decision.refusals.size(), 3u) << s.decision.summary();
  EXPECT_EQ(s.decision.refusals[0].code, Code::DeviceUnknown);
  EXPECT_NE(s.decision.refusals[0].message.find("namespace alpha"), std::string::npos);
  EXPECT_EQ(s.decision.refusals[1].code, Code::DeviceUnavailable);
  EXPECT_NE(s.decision.refusals[1].message.find("Lost"), std::string::npos);
  EXPECT_EQ(s.decision.refusals[2].code, Code::DeviceUnavailable);
}

TEST_F(VmDoor, ADeviceAnotherVmHoldsOrIsStartingWithIsRefusedNamingIt) {
  VirtualMachineInstance other = vmi("other", {});
  other.uid = "uid-other";
  put(c, other);
  put(c, attachedTo(device("alpha", "live", "h200", 1, DevicePhase::Bound, "gpu-1"), "other", "uid-other", "t1",
                    c.now - 100));
  put(c, attachedTo(device("alpha", "starting", "h200", 1, DevicePhase::Bound, "gpu-1"), "third", "", "t2", c.now - 5));
  VmiStart s = plan(vmi("vm", {"live", "starting"}));
  ASSERT_EQ(s.decision.refusals.size(), 2u) << s.decision.summary();
  EXPECT_EQ(s.decision.refusals[0].code, Code::DeviceAttached);
  EXPECT_NE(s.decision.refusals[0].message.find("vmi/alpha/other"), std::string::npos);
  EXPECT_NE(s.decision.refusals[1].message.find("vmi/alpha/third (starting)"), std::string::npos);
}

TEST_F(VmDoor, AStaleAttachmentDoesNotHoldTheDevice) {
  // The VMI of the uid is gone; another attachment never saw its VMI appear.
  put(c, attachedTo(device("alpha", "orphan", "h200", 1, DevicePhase::Bound, "gpu-1"), "gone", "uid-gone", "t1",
                    c.now - 100));
  put(c, attachedTo(device("alpha", "expired", "h200", 1, DevicePhase::Bound, "gpu-1"), "never", "", "t2",
                    c.now - kBound - 1));
  VmiStart s = plan(vmi("vm", {"orphan", "expired"}));
  EXPECT_TRUE(s.decision.allowed()) << s.decision.summary();
  EXPECT_EQ(s.attach.size(), 2u);
}

TEST_F(VmDoor, AVmiRecreatedUnderTheSameNameDoesNotInheritByName) {
  VirtualMachineInstance now = vmi("vm", {});
  now.uid = "uid-new";
  put(c, now);
  GpuDevice d =
      attachedTo(device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-1"), "vm", "uid-old", "t1", c.now - 100);
  put(c, d);
  EXPECT_EQ(attachmentVmi(c, d), nullptr);
  EXPECT_TRUE(attachedDevices(c, now).empty());
  AttachmentStep step = attachmentStep(c, d, {c.now, kBound});
  EXPECT_EQ(step.action, AttachmentAction::Detach);
  EXPECT_NE(step.reason.find("recreated"), std::string::npos);
}

TEST_F(VmDoor, TheSecondCallWithTheSameTokenWritesNothingAndAnswersTheSame) {
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-2"));
  VirtualMachineInstance v = vmi("vm", {"held"}, {{"h200", 1}});
  VmiStart first = plan(v);
  ASSERT_TRUE(first.decision.allowed()) << first.decision.summary();
  // What the first call wrote: the held device attached, the template created.
  put(c, attachedTo(c.devices.at("alpha/held"), "vm", "", "tok12345abcd", c.now));
  GpuDevice t = device("alpha", first.create[0].name, "h200", 1, DevicePhase::Bound, "gpu-2");
  t.fromTemplate = true;
  t = attachedTo(t, "vm", "", "tok12345abcd", c.now);
  put(c, t);
  v.attachToken = "tok12345abcd";
  VmiStart again = plan(v);
  ASSERT_TRUE(again.decision.allowed()) << again.decision.summary();
  EXPECT_TRUE(again.attach.empty());
  EXPECT_TRUE(again.create.empty());
  EXPECT_EQ(again.gpus, first.gpus);
  EXPECT_EQ(*again.node, "gpu-2");
  // Another VMI with its own token is refused the held device meanwhile.
  VmiStart rival = plan(vmi("rival", {"held"}), "othertoken99");
  EXPECT_TRUE(has(rival.decision, Code::DeviceAttached)) << rival.decision.summary();
}

TEST_F(VmDoor, OnlyClassesForVmsThatKubeVirtPermits) {
  put(c, vgpuClass());
  put(c, sharedClass());
  VmiStart s = plan(vmi("vm", {}, {{"a100-10c", 1}, {"v100-8g", 1}}));
  ASSERT_EQ(s.decision.refusals.size(), 2u) << s.decision.summary();
  EXPECT_EQ(s.decision.refusals[0].code, Code::NotPermitted);
  EXPECT_NE(s.decision.refusals[0].message.find("mediatedDevices"), std::string::npos);
  EXPECT_NE(s.decision.refusals[1].message.find("serves pods"), std::string::npos);
  c.permittedHostDevices.reset();
  VmiStart none = plan(vmi("vm", {}, {{"h200", 1}}));
  EXPECT_TRUE(has(none.decision, Code::NotPermitted));
  EXPECT_NE(none.decision.summary().find("no KubeVirt CR"), std::string::npos) << none.decision.summary();
}

// No KubeVirt CR known (none exists, or the kind is not watched: both leave
// the cache synced and empty) fails closed for held devices and templates alike.
TEST_F(VmDoor, WithNoKubeVirtCrKnownEveryHostDeviceIsRefusedNamingTheMissingCr) {
  c.permittedHostDevices.reset();
  put(c, device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-1"));
  for (const VirtualMachineInstance& v : {vmi("vm", {"held"}), vmi("vm", {}, {{"h200", 1}})}) {
    VmiStart s = plan(v);
    ASSERT_EQ(s.decision.refusals.size(), 1u) << s.decision.summary();
    EXPECT_EQ(s.decision.refusals[0].code, Code::NotPermitted);
    const std::string& why = s.decision.refusals[0].message;
    EXPECT_NE(why.find("Tally knows no KubeVirt CR (kubevirt.io/v1 kubevirts"), std::string::npos) << why;
    EXPECT_NE(why.find("--watch-kubevirt"), std::string::npos) << why;
    EXPECT_TRUE(s.gpus.empty());
  }
}

TEST_F(VmDoor, AnUnsyncedCacheRefusesClosed) {
  c.caches[Kind::KubeVirt].synced = false;
  VmiStart s = plan(vmi("vm", {}, {{"h200", 1}}));
  EXPECT_TRUE(has(s.decision, Code::CacheNotSynced)) << s.decision.summary();
}

TEST_F(VmDoor, MaxCountCountsTheWholeSet) {
  DeviceClass cls = passthroughClass();
  cls.maxCount = 2;
  put(c, cls);
  put(c, device("alpha", "held", "h200", 2, DevicePhase::Bound, "gpu-1"));
  VmiStart s = plan(vmi("vm", {"held"}, {{"h200", 1}}));
  EXPECT_TRUE(has(s.decision, Code::CountAboveMax)) << s.decision.summary();
}

TEST_F(VmDoor, AVgpuNodeWithOneUnhealthyParentServesFromTheOthersSlots) {
  put(c, vgpuClass());
  c.permittedHostDevices->push_back(PermittedHostDevice{std::string(kA100Vgpu), "GRID A100-10C", true, true});
  Node n = gpuNode("vgpu-1", NodeMode::VmVgpu, kA100Vgpu, 8);
  n.inventory =
      std::vector<InventoryParent>{parent("p0", false, kA100Vgpu, 4, 0, 4), parent("p1", true, kA100Vgpu, 4, 1, 3)};
  put(c, n);
  // The healthy parent serves 4: a set of 3 fits, one of 5 does not.
  EXPECT_TRUE(plan(vmi("vm", {}, {{"a100-10c", 3}})).decision.allowed());
  EXPECT_FALSE(plan(vmi("vm", {}, {{"a100-10c", 5}})).decision.allowed());
}

TEST_F(VmDoor, AttachedDevicesAreMatchedByUidOrBeforeItByToken) {
  VirtualMachineInstance v = vmi("vm", {});
  v.uid = "uid-vm";
  v.attachToken = "tok";
  put(c, attachedTo(device("alpha", "a", "h200", 1, DevicePhase::Bound, "gpu-1"), "vm", "uid-vm", "tok", c.now));
  put(c, attachedTo(device("alpha", "b", "h200", 1, DevicePhase::Bound, "gpu-1"), "vm", "", "tok", c.now));
  put(c, attachedTo(device("alpha", "c", "h200", 1, DevicePhase::Bound, "gpu-2"), "vm", "", "forged", c.now));
  auto devices = attachedDevices(c, v);
  ASSERT_EQ(devices.size(), 2u);
  SetNode at = attachedNode(c, v);
  ASSERT_TRUE(at.node) << at.decision.summary();
  EXPECT_EQ(*at.node, "gpu-1");
}

TEST_F(VmDoor, TheReconcilerFillsTheUidUndoesWhatNeverStartedAndReleasesWithTheVmi) {
  GpuDevice waiting =
      attachedTo(device("alpha", "w", "h200", 1, DevicePhase::Bound, "gpu-1"), "vm", "", "tok", c.now - 5);
  // No VMI yet, within the bound: kept, looked at again when it passes.
  AttachmentStep keep = attachmentStep(c, waiting, {c.now, kBound});
  EXPECT_EQ(keep.action, AttachmentAction::Keep);
  EXPECT_EQ(keep.recheckAt, c.now - 5 + kBound);
  // Past the bound: a held device is detached, a template device released.
  c.now += kBound;
  EXPECT_EQ(attachmentStep(c, waiting, {c.now, kBound}).action, AttachmentAction::Detach);
  GpuDevice tmpl = waiting;
  tmpl.fromTemplate = true;
  EXPECT_EQ(attachmentStep(c, tmpl, {c.now, kBound}).action, AttachmentAction::Delete);
  // The VMI exists with the token: its uid is recorded.
  VirtualMachineInstance v = vmi("vm", {});
  v.uid = "uid-vm";
  v.attachToken = "tok";
  put(c, v);
  AttachmentStep fill = attachmentStep(c, waiting, {c.now, kBound});
  EXPECT_EQ(fill.action, AttachmentAction::FillUid);
  EXPECT_EQ(fill.uid, "uid-vm");
  // Deleted with the VMI.
  GpuDevice live = waiting;
  live.attachedTo.uid = "uid-vm";
  EXPECT_EQ(attachmentStep(c, live, {c.now, kBound}).action, AttachmentAction::Keep);
  c.vmis.clear();
  EXPECT_EQ(attachmentStep(c, live, {c.now, kBound}).action, AttachmentAction::Detach);
  // Unsynced: nothing is decided.
  c.caches[Kind::VirtualMachineInstance].synced = false;
  EXPECT_EQ(attachmentStep(c, live, {c.now, kBound}).action, AttachmentAction::Keep);
}

TEST_F(VmDoor, TheBinderPlacesAnAttachedSetWholeBeforeItsVmiExists) {
  // A template device created with the set named: the held member is found.
  GpuDevice held = attachedTo(device("alpha", "held", "h200", 1, DevicePhase::Pending), "vm", "", "tok", c.now);
  GpuDevice tmpl = attachedTo(device("alpha", "vm-tok-0", "h200", 1, DevicePhase::Pending), "vm", "", "tok", c.now);
  held.attachSet = tmpl.attachSet = {"held", "vm-tok-0", "vm-tok-1"};
  put(c, held);
  put(c, tmpl);
  DeviceSet set = deviceSetOf(c, c.devices.at("alpha/vm-tok-0"));
  EXPECT_EQ(set.members.size(), 2u);
  EXPECT_EQ(set.missing, std::vector<std::string>{"vm-tok-1"});
  EXPECT_EQ(set.vmi, "alpha/vm");
}

// What a door judges a VMI it read from the API server by (its cache may
// lag the device: attachmentHolder of a snapshot without the VMI is empty).
TEST_F(VmDoor, AVmiHoldsTheAttachmentByItsUidOnceRecordedByItsTokenBefore) {
  GpuDevice d = device("alpha", "held", "h200", 1, DevicePhase::Bound);
  VirtualMachineInstance v = vmi("vm", {"held"});
  v.uid = "uid-1";
  v.attachToken = "tok";
  EXPECT_FALSE(holdsAttachment(v, d)) << "not attached";
  d = attachedTo(d, "vm", "uid-1", "tok", c.now);
  EXPECT_TRUE(holdsAttachment(v, d));
  EXPECT_TRUE(attachmentHolder(c, d, {c.now + 100, kBound}).empty()) << "the snapshot lacks the VMI: free by it";
  v.uid = "uid-2";  // the same name, another VMI
  EXPECT_FALSE(holdsAttachment(v, d));
  d.attachedTo.uid.clear();  // not recorded yet: the token decides
  EXPECT_TRUE(holdsAttachment(v, d));
  v.attachToken = "other";
  EXPECT_FALSE(holdsAttachment(v, d));
  v.ns = "beta";
  v.attachToken = "tok";
  EXPECT_FALSE(holdsAttachment(v, d)) << "another namespace";
}

TEST_F(VmDoor, TheAttachAndDetachTransitionsMoveThePhaseOnlyForADeviceHoldingNodeUnits) {
  // Attached by the VM door: the VMI, token, set and time recorded; a placed
  // device becomes Attached, a Pending one stays Pending (it holds no units yet).
  GpuDevice placed = device("alpha", "held", "h200", 1, DevicePhase::Bound, "gpu-1");
  GpuDevice on = attachedBy(placed, "alpha", "vm", "tok", {"held", "vm-gpu-0"}, c.now);
  EXPECT_EQ(on.phase, DevicePhase::Attached);
  EXPECT_EQ(on.attachedTo, (ObjectRef{"alpha", "vm", ""}));
  EXPECT_EQ(on.attachToken, "tok");
  EXPECT_EQ(on.attachSet, (std::vector<std::string>{"held", "vm-gpu-0"}));
  EXPECT_EQ(on.attachedAt, c.now);
  EXPECT_EQ(
      attachedBy(device("alpha", "p", "h200", 1, DevicePhase::Pending, ""), "alpha", "vm", "tok", {}, c.now).phase,
      DevicePhase::Pending);
  // Detached: the attachment gone, Attached back to Bound, still held on its node.
  GpuDevice off = detached(on);
  EXPECT_EQ(off.phase, DevicePhase::Bound);
  EXPECT_TRUE(off.attachedTo.empty());
  EXPECT_TRUE(off.attachToken.empty());
  EXPECT_TRUE(off.attachSet.empty());
  EXPECT_EQ(off.attachedAt, 0);
  EXPECT_EQ(off.node, "gpu-1");
  // The reconciler's steps: FillUid records the uid, Detach detaches, Keep
  // and Delete change nothing.
  GpuDevice waiting = on;
  waiting.phase = DevicePhase::Bound;
  AttachmentStep fill{AttachmentAction::FillUid, "uid-vm", "", 0};
  GpuDevice filled = attachmentAfter(waiting, fill);
  EXPECT_EQ(filled.attachedTo.uid, "uid-vm");
  EXPECT_EQ(filled.phase, DevicePhase::Attached);
  EXPECT_EQ(attachmentAfter(on, {AttachmentAction::Detach, "", "gone", 0}).phase, DevicePhase::Bound);
  EXPECT_EQ(attachmentAfter(on, {AttachmentAction::Keep, "", "", 0}).attachToken, "tok");
  EXPECT_EQ(attachmentAfter(on, {AttachmentAction::Delete, "", "", 0}).attachToken, "tok");
}

}  // namespace
}  // namespace tally::model
