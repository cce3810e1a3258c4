// The cases the seeds name, each failing closed: releasing reservations keep
// capacity, only whole-device VM profiles are reserved, what cannot be read is
// refused, plan() is a real proof, and one launcher rule serves every reader.

#include <gtest/gtest.h>

#include <algorithm>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/index.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {
using namespace testing;

Addon reservationAddon(std::string id, std::string profile, std::int64_t devices = 1) {
  Addon a;
  a.id = std::move(id);
  a.selfService = false;
  a.gpu[std::move(profile)] = GpuGrant{devices, 0, 0, 0};
  return a;
}

Addon quotaAddon(std::string id, std::string profile, std::int64_t devices = 1) {
  Addon a = reservationAddon(std::move(id), std::move(profile), devices);
  a.selfService = true;
  return a;
}

bool hasCode(const Decision& d, Code code) {
  return std::any_of(d.refusals.begin(), d.refusals.end(), [&](const Refusal& r) { return r.code == code; });
}

std::string allMessages(const Decision& d) { return d.summary(); }

// Two H200 nodes of 4 (8 devices), one organization acme holding a 2-device
// reservation through its operator-only add-on, every HRQ converged.
struct Seeded : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    c.plans->addons["h200-reserved"] = reservationAddon("h200-reserved", "h200");
    c.plans->addons["h200-quota"] = quotaAddon("h200-quota", "h200");
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, ns("globex"));
    put(c, org("acme", {{"h200-reserved", 2}}));
    put(c, hrq("acme", "plan-quota", key, 2));
    c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{2, 0};
    c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
  }
  const DeviceClass& pool() const { return c.classes.at("h200"); }
  std::vector<Finding> findings() const { return auditPool(c, pool()); }
  bool finds(FindingCode code) const {
    auto all = findings();
    return std::any_of(all.begin(), all.end(), [&](const Finding& f) { return f.code == code; });
  }
  std::string findingText() const {
    std::string out;
    for (const auto& f : findings()) out += std::string(toString(f.code)) + ": " + f.message + "\n";
    return out;
  }
  ReservationRecord releasing() const {
    auto r = record("gpu-res-1", "acme", "h200", 2, ReservationState::Releasing);
    return r;
  }
};

// --- 1. Releasing keeps capacity ------------------------------------------

TEST_F(Seeded, CleanSeedHasNoFindings) { EXPECT_TRUE(findings().empty()) << findingText(); }

TEST_F(Seeded, ReleasingRecordStaysInTheInvariantsReservedTerm) {
  c.ledger.records.back() = releasing();
  auto inv = evaluateInvariant(c, pool());
  EXPECT_EQ(inv.reserved.units, 2);
  EXPECT_EQ(inv.headroom, 8 - 2 - 0 - 1);
}

TEST_F(Seeded, ReleasingReservationKeepsItsIdleCapacityHeldFromOtherOrganizations) {
  c.ledger.records.back() = releasing();
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_EQ(idleReservedByOthers(c, view, pool(), nullptr), 2);
  // globex asks for all 7 devices not behind acme's idle reservation... and one more.
  put(c, org("globex", {{"h200-quota", 8}}));
  put(c, hrq("globex", "plan-quota", key, 8));
  Decision d = checkDeviceOrder(c, view, DeviceOrder{"globex", "gpudevice/globex/big", {{"h200", 7}}});
  EXPECT_TRUE(hasCode(d, Code::ReservedForOthers)) << allMessages(d);
}

TEST_F(Seeded, PlanCountsAConcurrentReleasingRecord) {
  c.ledger.records.back() = releasing();
  auto result = plan(c, AddonQuantityChange{"acme", "h200-quota", 5});
  ASSERT_EQ(result.after.size(), 1u);
  EXPECT_EQ(result.after.front().reserved.units, 2);
  EXPECT_EQ(result.after.front().headroom, 8 - 2 - 5 - 1);
}

// --- 2. Only whole-device VM profiles can be reserved ------------------------

TEST_F(Seeded, RecordOnAVgpuPoolIsAProfileModeMismatchAndPlanRefusesIt) {
  put(c, vgpuClass());
  c.plans->addons["a100-reserved"] = reservationAddon("a100-reserved", "a100-10c");
  auto r = record("gpu-res-2", "acme", "a100-10c", 1, ReservationState::Pending, "a100-reserved");
  c.ledger.records.push_back(r);
  auto found = auditPool(c, c.classes.at("a100-10c"));
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const Finding& f) {
    return f.code == FindingCode::ProfileModeMismatch && f.message.find("gpu-res-2") != std::string::npos;
  }));
  c.ledger.records.pop_back();
  auto result = plan(c, AddRecordChange{r});
  EXPECT_TRUE(hasCode(result.decision, Code::ReservationMismatch)) << allMessages(result.decision);
}

TEST_F(Seeded, OperatorOnlyReservationAddonOfASharedPoolIsAFinding) {
  put(c, sharedClass());
  c.plans->addons["v100-reserved"] = reservationAddon("v100-reserved", "v100-8g");
  auto found = auditPool(c, c.classes.at("v100-8g"));
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const Finding& f) {
    return f.code == FindingCode::ProfileModeMismatch && f.subject == "addon/v100-reserved";
  }));
}

TEST_F(Seeded, RecordWhoseAddonIsSelfServiceIsAFinding) {
  c.ledger.records.back().addonId = "h200-quota";
  EXPECT_TRUE(finds(FindingCode::ProfileModeMismatch)) << findingText();
}

TEST_F(Seeded, RecordWhoseAddonGrantsAnotherProfileIsAFinding) {
  put(c, passthroughClass("h100", "nvidia.com/GH100_H100"));
  c.plans->addons["h100-reserved"] = reservationAddon("h100-reserved", "h100");
  c.ledger.records.back().addonId = "h100-reserved";
  EXPECT_TRUE(finds(FindingCode::ProfileModeMismatch)) << findingText();
}

TEST_F(Seeded, RecordWhoseAddonAlsoGrantsSharesIsAFinding) {
  c.plans->addons["h200-reserved"].gpu["h200"].shares = 2;
  EXPECT_TRUE(finds(FindingCode::ProfileModeMismatch)) << findingText();
}

// --- 3. Unknown means refused ----------------------------------------------

TEST_F(Seeded, OrganizationWithGpuAddonsButNoHrqFailsTheAuditAndPlan) {
  put(c, org("globex", {{"h200-quota", 3}}));  // the quota controller has not written its HRQ yet
  EXPECT_TRUE(finds(FindingCode::QuotaUnknown)) << findingText();
  auto inv = evaluateInvariant(c, pool());
  EXPECT_FALSE(inv.holds()) << "hard quota unknown is never 0";
  EXPECT_NE(inv.equation().find("globex"), std::string::npos) << inv.equation();
  auto r = record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending);
  auto result = plan(c, AddRecordChange{r});
  EXPECT_TRUE(hasCode(result.decision, Code::InvariantUnknown)) << allMessages(result.decision);
}

TEST_F(Seeded, OrganizationWithoutGpuAddonsNeedsNoHrq) {
  put(c, org("initech"));
  EXPECT_TRUE(findings().empty()) << findingText();
}

TEST_F(Seeded, AddonGrantingAProfileThatIsNoClassIsUnattributed) {
  c.plans->addons["b200-quota"] = quotaAddon("b200-quota", "b200");
  c.organizations.at("acme/acme").addons.push_back({"b200-quota", 1});
  EXPECT_TRUE(finds(FindingCode::UnattributedQuantity)) << findingText();
}

TEST_F(Seeded, HrqHardThatTheAddonsDoNotExplainIsUnattributed) {
  c.hrqs.at("acme/plan-quota").hard.set(key, 5);
  c.hrqs.at("acme/plan-quota").statusHard.set(key, 5);
  EXPECT_TRUE(finds(FindingCode::UnattributedQuantity)) << findingText();
}

TEST_F(Seeded, HrqStatusHardDifferingFromSpecIsAStatusDisagreement) {
  c.hrqs.at("acme/plan-quota").statusHard.set(key, 1);
  EXPECT_TRUE(finds(FindingCode::StatusDisagreement)) << findingText();
  c.hrqs.at("acme/plan-quota").statusHard = {};
  EXPECT_TRUE(finds(FindingCode::StatusDisagreement)) << "HNC never reported it";
}

TEST_F(Seeded, ActiveRecordAboveItsOwnAddonGrantFailsEvenWhenOtherQuotaCoversIt) {
  // The org's total hard (2 + 3) covers 2 devices, but its reservation add-on grants only 1.
  c.organizations.at("acme/acme").addons = {{"h200-reserved", 1}, {"h200-quota", 3}};
  c.hrqs.at("acme/plan-quota").hard.set(key, 4);
  c.hrqs.at("acme/plan-quota").statusHard.set(key, 4);
  auto found = findings();
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const Finding& f) {
    return f.code == FindingCode::StatusDisagreement &&
           f.message.find("under add-on h200-reserved") != std::string::npos;
  })) << findingText();
}

TEST_F(Seeded, BudgetOfANamespaceMissingFromTheCacheIsNamespaceUnknown) {
  put(c, hrq("acme", "gpu-cap", key, 0));  // an ancestor's limit the check would skip
  TotalsCapacityView view(c, computeUsage(c));
  auto refusal = checkBudget(c, view, "acme-new", BudgetAsk{key, 1, 0});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, Code::NamespaceUnknown);
  EXPECT_NE(refusal->message.find("acme-new"), std::string::npos);
  // A pod there is unresolvable, and the raw-pod door refuses it.
  Pod p = gpuPod("acme-new", "p", kH200, 1);
  PodDemand demand = podDemand(c, view, p);
  EXPECT_EQ(filterNode(c, view, demand, c.nodes.at("gpu-1")).verdict, Verdict::Unresolvable);
  EXPECT_TRUE(hasCode(checkPodBudget(c, view, p), Code::NamespaceUnknown));
  EXPECT_TRUE(hasCode(checkDeviceOrder(c, view, DeviceOrder{"acme-new", "gpudevice/acme-new/d", {{"h200", 1}}}),
                      Code::NamespaceUnknown));
}

TEST_F(Seeded, LedgerThatIsUnknownFailsEveryPoolClosed) {
  c.caches[Kind::Ledger].synced = false;
  EXPECT_TRUE(finds(FindingCode::StaleCapacity)) << findingText();
  EXPECT_FALSE(evaluateInvariant(c, pool()).holds());
  EXPECT_NE(findingText().find("ledger is unknown"), std::string::npos) << findingText();
}

TEST_F(Seeded, LedgerLastReadLongAgoIsStale) {
  // A re-read that keeps failing leaves the last good read's time: stale, not synced.
  c.caches[Kind::Ledger].lastSynced = c.now - 3600;
  EXPECT_TRUE(finds(FindingCode::StaleCapacity)) << findingText();
}

TEST_F(Seeded, NodeAdvertisingPassthroughAndHamiIsBothDevicePlugins) {
  c.nodes.at("gpu-2").allocatable.set("nvidia.com/gpu", 4);
  EXPECT_TRUE(finds(FindingCode::BothDevicePlugins)) << findingText();
  c.nodes.at("gpu-2").allocatable.set("nvidia.com/gpu", 0);  // a stale registration with nothing behind it
  EXPECT_FALSE(finds(FindingCode::BothDevicePlugins)) << findingText();
}

TEST_F(Seeded, CapacityAboveAllocatableIsDegradedHealth) {
  c.nodes.at("gpu-1").capacity.set(kH200, 4);
  EXPECT_FALSE(finds(FindingCode::DegradedHealth));
  c.nodes.at("gpu-1").allocatable.set(kH200, 3);
  EXPECT_TRUE(finds(FindingCode::DegradedHealth)) << findingText();
}

TEST_F(Seeded, UnhealthyInventoryParentIsDegradedHealth) {
  put(c, vgpuClass());
  Node n = gpuNode("vgpu-1", NodeMode::VmVgpu, kA100Vgpu, 6);
  n.inventory = std::vector{parent("0000:3b:00.0", true), parent("0000:3c:00.0", false)};
  put(c, n);
  auto found = auditPool(c, c.classes.at("a100-10c"));
  EXPECT_TRUE(
      std::any_of(found.begin(), found.end(), [](const Finding& f) { return f.code == FindingCode::DegradedHealth; }));
}

TEST(AnyVendor, ClassOfAnyVendorServesUnitsAndItsPodsCount) {
  Cluster c = syncedCluster();
  auto cls = passthroughClass("gaudi2", "habana.ai/gaudi2");
  put(c, cls);
  put(c, gpuNode("hl-1", NodeMode::VmPassthrough, "habana.ai/gaudi2", 8));
  put(c, ns("acme"));
  put(c, gpuPod("acme", "train", "habana.ai/gaudi2", 3, "hl-1"));
  EXPECT_EQ(evaluateInvariant(c, c.classes.at("gaudi2")).healthy.units, 8);
  UsageTotals totals = computeUsage(c);
  EXPECT_EQ(totals.nodeUsed["hl-1"].get("habana.ai/gaudi2"), 3);
  EXPECT_EQ(totals.namespaceUsed["acme"].get(quotaKey("habana.ai/gaudi2")), 3);
}

TEST(AnyVendor, ExtendedResourceNoClassSellsIsNoGpu) {
  Cluster c = syncedCluster();
  put(c, passthroughClass());
  put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
  put(c, ns("acme"));
  Pod p = gpuPod("acme", "nic", kH200, 1);
  p.containers.front().set("example.com/rdma", 1);
  EXPECT_TRUE(isExtendedResourceName("example.com/rdma"));
  EXPECT_FALSE(isGpuResource(c, "example.com/rdma"));
  TotalsCapacityView view(c, computeUsage(c));
  PodDemand demand = podDemand(c, view, p);
  EXPECT_FALSE(demand.requests.contains("example.com/rdma"));
  EXPECT_EQ(filterNode(c, view, demand, c.nodes.at("gpu-1")).verdict, Verdict::Fits);
}

TEST(AnyVendor, ShellRulesLiveInTheModel) {
  EXPECT_TRUE(isGpuQuotaKey("requests.habana.ai/gaudi2"));
  EXPECT_TRUE(isGpuQuotaKey("limits.nvidia.com/gpu"));
  EXPECT_FALSE(isGpuQuotaKey("requests.cpu"));
  EXPECT_FALSE(isGpuQuotaKey("requests.kubernetes.io/foo"));
  EXPECT_FALSE(isExtendedResourceName("memory"));
  Pod cpuOnly;
  EXPECT_FALSE(mayHoldGpu(cpuOnly));
  cpuOnly.hasResourceClaims = true;
  EXPECT_TRUE(mayHoldGpu(cpuOnly));
  Pod p = gpuPod("a", "b", "habana.ai/gaudi2", 1);
  EXPECT_TRUE(mayHoldGpu(p));
  EXPECT_EQ(std::size(kTerminalPodPhases), 2u);
  p.phase = PodPhase::Succeeded;
  EXPECT_TRUE(isTerminal(p));
}

// --- 4. plan is a real proof ------------------------------------------------

TEST_F(Seeded, PlanReplacesTheRecordOfTheSameIdSoPendingToActiveCountsOnce) {
  c.ledger.records.back() = record("gpu-res-1", "acme", "h200", 2, ReservationState::Pending);
  auto active = record("gpu-res-1", "acme", "h200", 2, ReservationState::Active);
  auto result = plan(c, AddRecordChange{active});
  EXPECT_TRUE(result.decision.allowed()) << allMessages(result.decision);
  ASSERT_EQ(result.after.size(), 1u);
  EXPECT_EQ(result.after.front().reserved.units, 2);
  EXPECT_EQ(result.after.front().reserved.sources.size(), 1u);
}

TEST_F(Seeded, PlanRefusesATransitionOffTheStateMachine) {
  auto back = record("gpu-res-1", "acme", "h200", 2, ReservationState::Pending);
  EXPECT_TRUE(hasCode(plan(c, AddRecordChange{back}).decision, Code::RecordTransition));
}

TEST_F(Seeded, PlanRefusesADuplicateId) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, ReservationState::Active));
  auto result = plan(c, AddRecordChange{releasing()});
  EXPECT_TRUE(hasCode(result.decision, Code::RecordDuplicate)) << allMessages(result.decision);
}

TEST_F(Seeded, PlanRefusesABrandNewRecordThatIsNotPending) {
  auto r = record("gpu-res-2", "acme", "h200", 1, ReservationState::Active);
  EXPECT_TRUE(hasCode(plan(c, AddRecordChange{r}).decision, Code::RecordTransition));
}

TEST_F(Seeded, PlanRefusesASecondTransactionInThePool) {
  c.ledger.records.push_back(record("gpu-res-2", "globex", "h200", 1, ReservationState::Pending));
  auto r = record("gpu-res-3", "acme", "h200", 1, ReservationState::Pending);
  auto result = plan(c, AddRecordChange{r});
  EXPECT_TRUE(hasCode(result.decision, Code::TransactionInFlight)) << allMessages(result.decision);
  EXPECT_NE(result.decision.summary().find("gpu-res-2"), std::string::npos);
}

TEST_F(Seeded, PlanIncludesEveryConcurrentPendingRecord) {
  put(c, passthroughClass("h200-licensed"));  // another pool, its own transaction
  c.ledger.records.push_back(record("gpu-res-2", "globex", "h200", 3, ReservationState::Pending));
  auto result = plan(c, AddonQuantityChange{"acme", "h200-quota", 1});
  ASSERT_FALSE(result.after.empty());
  EXPECT_EQ(result.after.front().reserved.units, 5);
}

TEST_F(Seeded, PlanRefusesAPoolClosedByAFailedAudit) {
  c.alerts.push_back({"GPUXidErrors", "h200"});
  auto r = record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending);
  auto result = plan(c, AddRecordChange{r});
  EXPECT_TRUE(hasCode(result.decision, Code::GateClosed)) << allMessages(result.decision);
  ASSERT_EQ(result.gates.size(), 1u);
  EXPECT_TRUE(result.gates.front().failed());
}

TEST_F(Seeded, PlanRefusesWhileAPublishedFailureAwaitsAcknowledgement) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  auto r = record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending);
  EXPECT_TRUE(hasCode(plan(c, AddRecordChange{r}).decision, Code::GateClosed));
}

TEST(Spare, EmptyPoolKeepsSpareZero) {
  auto cls = passthroughClass();
  EXPECT_EQ(spareDevices(cls, 0), 0);
  cls.operatorSpareDevices = 2;
  EXPECT_EQ(spareDevices(cls, 0), 0);
  EXPECT_EQ(spareDevices(cls, 5), 2);
}

struct Sequential : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    auto vm = passthroughClass();
    vm.creationPaused = true;
    auto pod = sharedClass("h200-shared", 144384, 36096, 25, 4);
    pod.resourceName = "nvidia.com/gpu";
    pod.creationPaused = true;
    put(c, vm);
    put(c, pod);
    Node n = gpuNode("seq-1", NodeMode::PodHami, "nvidia.com/gpu", 16);
    n.inventory = std::vector{parent("g0", true), parent("g1", true), parent("g2", true), parent("g3", true)};
    put(c, n);
  }
};

TEST_F(Sequential, NodeCanLeaveAPoolThatHasNoQuotaAndNoHolders) {
  auto result = plan(c, NodeModeChange{"seq-1", NodeMode::VmPassthrough});
  EXPECT_TRUE(result.decision.allowed()) << result.decision.summary();
  for (const auto& inv : result.after) EXPECT_TRUE(inv.holds()) << inv.equation();
}

TEST_F(Sequential, ModeTransitionNeedsBothPoolsCreationGatesClosed) {
  c.classes.at("h200").creationPaused = false;
  auto result = plan(c, NodeModeChange{"seq-1", NodeMode::VmPassthrough});
  EXPECT_TRUE(hasCode(result.decision, Code::ModeTransitionBlocked));
  EXPECT_NE(result.decision.summary().find("creation in pool h200 is open"), std::string::npos)
      << result.decision.summary();
}

// --- 5. A closed gate refuses new grants ------------------------------------

TEST_F(Seeded, AddonIncreaseIsRefusedWhileTheGateIsClosedByAFailure) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  Organization after = c.organizations.at("acme/acme");
  after.addons.push_back({"h200-quota", 1});
  TotalsCapacityView view(c, computeUsage(c));
  Decision d = checkAddonChange(c, view, c.organizations.at("acme/acme"), after);
  EXPECT_TRUE(hasCode(d, Code::GateClosed)) << allMessages(d);
}

// Found by the differential test: the Organization door read only a
// published failure, so with the auditor off (nothing published) or before a
// class was ever audited it granted more quota where tallyctl plan refused.
TEST_F(Seeded, AddonIncreaseReadsTheGateAsThisBinarysDoorsDo) {
  Organization after = c.organizations.at("acme/acme");
  after.addons.push_back({"h200-quota", 1});
  auto decide = [&] {
    TotalsCapacityView view(c, computeUsage(c));
    return checkAddonChange(c, view, c.organizations.at("acme/acme"), after);
  };
  c.classes.at("h200").gateDecided = false;
  Decision undecided = decide();
  EXPECT_TRUE(hasCode(undecided, Code::GateClosed)) << allMessages(undecided);
  EXPECT_NE(undecided.summary().find("not audited yet"), std::string::npos) << undecided.summary();
  EXPECT_TRUE(hasCode(plan(c, AddonQuantityChange{"acme", "h200-quota", 1}).decision, Code::GateClosed));

  // No auditor: the door evaluates the audit itself, which a firing alert fails.
  c.gates = GateSource::Evaluated;
  c.alerts.push_back({"GPUXidErrors", "h200"});
  Decision evaluated = decide();
  EXPECT_TRUE(hasCode(evaluated, Code::GateClosed)) << allMessages(evaluated);
  c.alerts.clear();
  EXPECT_FALSE(hasCode(decide(), Code::GateClosed)) << allMessages(decide());
}

TEST_F(Seeded, AddonIncreaseIsAllowedWhileOnlyATransactionFreezesCreation) {
  // The seed's step 4: the add-on is assigned while creation is closed for the hold.
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateReason = "reservation gpu-res-2 is pending";
  Organization after = c.organizations.at("acme/acme");
  after.addons.push_back({"h200-quota", 1});
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_TRUE(checkAddonChange(c, view, c.organizations.at("acme/acme"), after).allowed());
}

TEST_F(Seeded, AddonIncreaseMustKeepTheInvariant) {
  Organization after = c.organizations.at("acme/acme");
  after.addons.push_back({"h200-quota", 5});  // 8 >= 2 + 5 + 1 holds; 6 would not
  TotalsCapacityView view(c, computeUsage(c));
  EXPECT_TRUE(checkAddonChange(c, view, c.organizations.at("acme/acme"), after).allowed());
  after.addons.back().quantity = 6;
  Decision d = checkAddonChange(c, view, c.organizations.at("acme/acme"), after);
  EXPECT_TRUE(hasCode(d, Code::InvariantBroken)) << allMessages(d);
}

// --- 6. One launcher reader -------------------------------------------------

struct Launchers : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    put(c, ns("acme"));
    put(c, device("acme", "held", "h200", 2, DevicePhase::Attached, "gpu-1"));
    c.devices.at("acme/held").attachedTo = ObjectRef{"acme", "vm", "vmi-uid-1"};
    VirtualMachineInstance vmi;
    vmi.ns = "acme";
    vmi.name = "vm";
    vmi.uid = "vmi-uid-1";
    vmi.activePods["uid-launcher"] = "gpu-1";
    put(c, vmi);
    put(c, gpuPod("acme", "launcher", kH200, 2, "gpu-1"));
  }
  // Every reader of the launcher rule, asked about one pod.
  struct Answers {
    std::int64_t scratchBudget, indexBudget, demandBudget;
    bool demandLauncher;
  };
  Answers ask(const std::string& podKey) {
    UsageTotals scratch = computeUsage(c);
    UsageIndex index = UsageIndex::fromCluster(c);
    TotalsCapacityView view(c, scratch);
    const Pod& p = c.pods.at(podKey);
    PodDemand demand = podDemand(c, view, p);
    const std::string key = quotaKey(kH200);
    return {scratch.namespaceUsed["acme"].get(key), index.totals().namespaceUsed["acme"].get(key),
            demand.budget.get(key), demand.launcherOf != nullptr};
  }
};

TEST_F(Launchers, LauncherIsCoveredByItsVmisDevicesInEveryReader) {
  auto a = ask("acme/launcher");
  EXPECT_EQ(a.scratchBudget, 2);  // the device's 2, the pod adds nothing
  EXPECT_EQ(a.indexBudget, 2);
  EXPECT_EQ(a.demandBudget, 0);
  EXPECT_TRUE(a.demandLauncher);
}

// Found by the differential test: the launcher door refuses to pin a pod
// whose VMI holds a device on no node, and the extender's demand follows the
// same rule instead of placing the launcher on pool units elsewhere.
TEST_F(Launchers, ALauncherWhoseDeviceIsLostGoesNowhere) {
  put(c, device("acme", "lost", "h200", 1, DevicePhase::Lost));
  c.devices.at("acme/lost").attachedTo = ObjectRef{"acme", "vm", "vmi-uid-1"};
  Pod pending = c.pods.at("acme/launcher");
  pending.nodeName.clear();
  pending.phase = PodPhase::Pending;
  put(c, pending);
  TotalsCapacityView view(c, computeUsage(c));
  PodDemand demand = podDemand(c, view, c.pods.at("acme/launcher"));
  ASSERT_NE(demand.launcherOf, nullptr);
  EXPECT_TRUE(demand.requiredNode.empty());
  ASSERT_FALSE(demand.podUnresolvable.empty());
  EXPECT_EQ(demand.podUnresolvable.front().code, Code::DeviceUnavailable) << demand.podUnresolvable.front().message;
  for (const char* node : {"gpu-1", "gpu-2"}) {
    EXPECT_EQ(filterNode(c, view, demand, c.nodes.at(node)).verdict, Verdict::Unresolvable) << node;
  }
}

TEST_F(Launchers, PodListedByTwoVmisLaunchesNeitherInEveryReader) {
  VirtualMachineInstance other;
  other.ns = "acme";
  other.name = "vm-2";
  other.uid = "vmi-uid-2";
  other.activePods["uid-launcher"] = "gpu-1";
  put(c, other);
  auto a = ask("acme/launcher");
  EXPECT_EQ(a.scratchBudget, 4) << "the pod's 2 count as raw usage beside the device's 2";
  EXPECT_EQ(a.indexBudget, 4);
  EXPECT_EQ(a.demandBudget, 2);
  EXPECT_FALSE(a.demandLauncher);
  // And incrementally: the second listing appears, then goes away.
  UsageIndex index = UsageIndex::fromCluster(c);
  index.removeVmi("acme", "vm-2");
  EXPECT_EQ(index.totals().namespaceUsed["acme"].get(quotaKey(kH200)), 2);
  index.upsertVmi(other);
  EXPECT_EQ(index.totals().namespaceUsed["acme"].get(quotaKey(kH200)), 4);
}

TEST_F(Launchers, DeviceWithAStaleNameButTheRightUidStillCovers) {
  c.devices.at("acme/held").attachedTo.name = "vm-old-name";
  auto a = ask("acme/launcher");
  EXPECT_EQ(a.scratchBudget, 2);
  EXPECT_EQ(a.indexBudget, 2);
  EXPECT_EQ(a.demandBudget, 0);
}

TEST_F(Launchers, VmiRecreatedUnderTheSameNameDoesNotInheritTheDevices) {
  c.vmis.at("acme/vm").uid = "vmi-uid-new";
  auto a = ask("acme/launcher");
  EXPECT_EQ(a.scratchBudget, 4);
  EXPECT_EQ(a.indexBudget, 4);
  EXPECT_EQ(a.demandBudget, 2);
}

// acme's two raw 2-GPU pods fill gpu-2 beside a pending 2-GPU pod of acme.
struct Preempt : Launchers {
  Pod pending;
  std::vector<const Pod*> victims;
  void SetUp() override {
    Launchers::SetUp();
    put(c, gpuPod("acme", "raw", kH200, 2, "gpu-2"));
    put(c, gpuPod("acme", "raw-2", kH200, 2, "gpu-2"));
    pending = gpuPod("acme", "new", kH200, 2);
    pending.phase = PodPhase::Pending;
    victims = {&c.pods.at("acme/raw"), &c.pods.at("acme/raw-2")};
  }
  std::optional<std::vector<const Pod*>> narrow() {
    TotalsCapacityView view(c, computeUsage(c));
    return narrowVictims(c, view, podDemand(c, view, pending), c.nodes.at("gpu-2"), victims);
  }
  Verdict filterWithout(const std::vector<const Pod*>& gone) {
    Cluster after = c;
    for (const Pod* v : gone) after.pods.erase(objectKey(v->ns, v->name));
    TotalsCapacityView view(after, computeUsage(after));
    return filterNode(after, view, podDemand(after, view, pending), after.nodes.at("gpu-2")).verdict;
  }
};

TEST_F(Preempt, OneVictimFreesTheUnitsThePodNeeds) {
  ASSERT_NE(filterWithout({}), Verdict::Fits);
  auto kept = narrow();
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->size(), 1u);
  EXPECT_EQ(filterWithout(*kept), Verdict::Fits);
}

TEST_F(Preempt, NamesNoVictimsWhereTheFilterStillRefusesForTheGate) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-x-1";
  EXPECT_FALSE(narrow());
}

TEST_F(Preempt, NamesNoVictimsWhenAnIdleReservationOfAnotherOrgStillBlocks) {
  // globex reserved 8 devices it does not use: every free unit backs it, so
  // evicting acme's pods frees units acme may not take anyway.
  c.plans->addons["h200-reserved"] = reservationAddon("h200-reserved", "h200");
  put(c, ns("globex"));
  put(c, org("globex", {{"h200-reserved", 8}}));
  put(c, hrq("globex", "plan-quota", quotaKey(kH200), 8));
  c.ledger.records.push_back(record("gpu-res-1", "globex", "h200", 8, ReservationState::Active));
  put(c, org("acme"));
  ASSERT_NE(filterWithout(victims), Verdict::Fits);
  EXPECT_FALSE(narrow());
}

TEST_F(Preempt, NamesNoVictimsWhileTheTenantsBudgetStillRefuses) {
  // acme's HRQ is full with pods elsewhere: evicting gpu-2's pods of another
  // tenant frees units, but not acme's budget.
  for (const Pod* v : victims) c.pods.at(objectKey(v->ns, v->name)).ns = "other";
  c.pods = {c.pods.begin(), c.pods.end()};
  put(c, ns("other"));
  std::map<std::string, Pod> moved;
  for (auto& [key, p] : c.pods) moved[objectKey(p.ns, p.name)] = p;
  c.pods = moved;
  victims = {&c.pods.at("other/raw"), &c.pods.at("other/raw-2")};
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 2));  // the held device's 2 already use it
  ASSERT_NE(filterWithout(victims), Verdict::Fits);
  EXPECT_FALSE(narrow());
}

TEST_F(Preempt, VictimsInTheSameSubtreeFreeItsBudgetToo) {
  put(c, hrq("acme", "plan-quota", quotaKey(kH200), 6));  // device 2 + raw 2 + raw-2 2 = 6, full
  auto kept = narrow();
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->size(), 1u);
  EXPECT_EQ(filterWithout(*kept), Verdict::Fits);
}

// --- 9. Messages that read right ---------------------------------------------

TEST_F(Seeded, BudgetMessageOfAPodAlreadyCountedSaysItIsIncluded) {
  put(c, hrq("globex", "plan-quota", key, 4));
  put(c, org("globex", {{"h200-quota", 4}}));
  for (int i = 0; i < 4; ++i) put(c, gpuPod("globex", "vm-" + std::to_string(i), kH200, 1, "gpu-2"));
  Pod waiting = gpuPod("globex", "waiting", kH200, 1);
  waiting.phase = PodPhase::Pending;
  put(c, waiting);
  TotalsCapacityView view(c, computeUsage(c));
  PodDemand demand = podDemand(c, view, c.pods.at("globex/waiting"));
  ASSERT_FALSE(demand.podWide.empty());
  const std::string& message = demand.podWide.front().message;
  EXPECT_NE(message.find("5 in use, this pod's 1 included, limit 4"), std::string::npos) << message;
  EXPECT_EQ(message.find("0 requested"), std::string::npos) << message;
}

}  // namespace
}  // namespace tally::model
