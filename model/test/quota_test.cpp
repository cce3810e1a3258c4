// The quota Tally writes: plan-quota's GPU keys from the add-ons (failing
// closed), project caps of project-specific reservations, the Organization's
// accelerator status from HNC's report, and the one grant a pending
// reservation admits while its transaction freezes the pool.

#include <gtest/gtest.h>

#include <algorithm>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/quota.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {
using namespace testing;

Addon addon(std::string id, std::string profile, GpuGrant grant, bool selfService = true) {
  Addon a;
  a.id = std::move(id);
  a.selfService = selfService;
  a.gpu[std::move(profile)] = grant;
  return a;
}

bool hasCode(const Decision& d, Code code) {
  return std::any_of(d.refusals.begin(), d.refusals.end(), [&](const Refusal& r) { return r.code == code; });
}

const std::string kH200Key = quotaKey(kH200);
const std::string kVgpuKey = quotaKey(kA100Vgpu);
const std::string kGpuKey = quotaKey("nvidia.com/gpu");
const std::string kMemKey = quotaKey("nvidia.com/gpumem");
const std::string kCoresKey = quotaKey("nvidia.com/gpucores");

// Three pools (passthrough H200, vGPU A100-10C, shared V100 8 GiB), their
// add-ons, and organization acme.
struct Quota : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, vgpuClass());
    put(c, sharedClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    c.plans->addons["h200-quota"] = addon("h200-quota", "h200", {1, 0, 0, 0});
    c.plans->addons["h200-reserved"] = addon("h200-reserved", "h200", {1, 0, 0, 0}, false);
    c.plans->addons["a100-slice"] = addon("a100-slice", "a100-10c", {2, 0, 0, 0});
    c.plans->addons["v100-share"] = addon("v100-share", "v100-8g", {0, 1, 8192, 25});
    put(c, ns("acme"));
    put(c, ns("acme-ml", {"acme"}));
    put(c, ns("globex"));
    put(c, org("acme"));
    put(c, org("globex"));
  }
  Organization& acme() { return c.organizations.at("acme/acme"); }
};

TEST_F(Quota, QuantitiesMultiplyEveryGrantOnTheirQuotaKeys) {
  acme().addons = {{"h200-quota", 3}, {"a100-slice", 2}, {"v100-share", 4}};
  PlanQuota q = desiredPlanQuota(c, acme());
  ASSERT_TRUE(q.known()) << q.unknown.front();
  EXPECT_EQ(q.hard.get(kH200Key), 3);
  EXPECT_EQ(q.hard.get(kVgpuKey), 4);
  EXPECT_EQ(q.hard.get(kGpuKey), 4);
  EXPECT_EQ(q.hard.get(kMemKey), 4 * 8192);
  EXPECT_EQ(q.hard.get(kCoresKey), 4 * 25);
}

TEST_F(Quota, EveryGpuKeyOfEveryClassIsOwnedAndZeroWhenNotGranted) {
  // An HRQ without a key sets no limit: an organization with no GPU add-on
  // gets every GPU key at 0, not no key.
  PlanQuota q = desiredPlanQuota(c, acme());
  ASSERT_TRUE(q.known());
  EXPECT_EQ(q.hard.size(), 5u);
  for (const auto& key : {kH200Key, kVgpuKey, kGpuKey, kMemKey, kCoresKey}) {
    EXPECT_TRUE(q.hard.contains(key)) << key;
    EXPECT_EQ(q.hard.get(key), 0) << key;
  }
  EXPECT_EQ(ownedPlanQuotaKeys(c), (std::vector<std::string>{kVgpuKey, kH200Key, kGpuKey, kCoresKey, kMemKey}));
}

TEST_F(Quota, ReservationAndPlainAddonsOfOnePoolAddUp) {
  acme().addons = {{"h200-quota", 2}, {"h200-reserved", 1}};
  EXPECT_EQ(desiredPlanQuota(c, acme()).hard.get(kH200Key), 3);
}

TEST_F(Quota, DisabledAddonGrantsNothingButStaysKnown) {
  c.plans->addons["h200-quota"].disabled = true;
  acme().addons = {{"h200-quota", 3}};
  PlanQuota q = desiredPlanQuota(c, acme());
  ASSERT_TRUE(q.known());
  EXPECT_EQ(q.hard.get(kH200Key), 0);
}

TEST_F(Quota, MissingCatalogueIsUnknownNeverZero) {
  acme().addons = {{"h200-quota", 3}};
  c.plans.reset();
  PlanQuota q = desiredPlanQuota(c, acme());
  EXPECT_FALSE(q.known());
  EXPECT_TRUE(q.hard.empty());
  EXPECT_NE(q.unknown.front().find("billing-plans"), std::string::npos) << q.unknown.front();
}

TEST_F(Quota, UnsyncedCatalogueIsUnknown) {
  c.caches[Kind::BillingPlans].synced = false;
  EXPECT_FALSE(desiredPlanQuota(c, acme()).known());
}

TEST_F(Quota, AddonTheCatalogueDoesNotDefineMakesTheOrganizationUnknown) {
  acme().addons = {{"h200-quota", 1}, {"mystery", 2}};
  PlanQuota q = desiredPlanQuota(c, acme());
  ASSERT_FALSE(q.known());
  EXPECT_NE(q.unknown.front().find("mystery"), std::string::npos) << q.unknown.front();
}

TEST_F(Quota, GrantOfAProfileThatIsNoClassMakesTheOrganizationUnknown) {
  c.plans->addons["b200-quota"] = addon("b200-quota", "b200", {1, 0, 0, 0});
  acme().addons = {{"b200-quota", 1}};
  PlanQuota q = desiredPlanQuota(c, acme());
  ASSERT_FALSE(q.known());
  EXPECT_NE(q.unknown.front().find("b200"), std::string::npos) << q.unknown.front();
}

TEST_F(Quota, ProjectReservationCapsItsProjectAtTheReservedDevices) {
  auto r = record("gpu-res-1", "acme", "h200", 2, ReservationState::Active);
  r.project = "acme-ml";
  c.ledger.records.push_back(r);
  auto caps = projectCaps(c);
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0].ns, "acme-ml");
  EXPECT_EQ(caps[0].hard, (ResourceList{{kH200Key, 2}}));
  EXPECT_EQ(caps[0].records, (std::vector<std::string>{"gpu-res-1"}));
}

TEST_F(Quota, PendingAndReleasingRecordsKeepTheCap) {
  auto a = record("gpu-res-1", "acme", "h200", 2, ReservationState::Releasing);
  auto b = record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending);
  a.project = b.project = "acme-ml";
  c.ledger.records = {a, b};
  EXPECT_EQ(projectCaps(c).at(0).hard.get(kH200Key), 3);
}

TEST_F(Quota, ReleasedOrCanceledReservationLeavesAnEmptyCapSoTallysKeyGoes) {
  auto a = record("gpu-res-1", "acme", "h200", 2, ReservationState::Released);
  auto b = record("gpu-res-2", "acme", "h200", 1, ReservationState::Canceled);
  a.project = b.project = "acme-ml";
  c.ledger.records = {a, b};
  auto caps = projectCaps(c);
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_TRUE(caps[0].hard.empty());
}

TEST_F(Quota, OrganizationPoolReservationSetsNoProjectCap) {
  auto a = record("gpu-res-1", "acme", "h200", 2, ReservationState::Active);
  auto b = record("gpu-res-2", "acme", "h200", 1, ReservationState::Active);
  b.project = "acme";  // the organization namespace: the org's pool
  c.ledger.records = {a, b};
  EXPECT_TRUE(projectCaps(c).empty());
}

TEST_F(Quota, UnknownLedgerSetsNoCap) {
  auto a = record("gpu-res-1", "acme", "h200", 2, ReservationState::Active);
  a.project = "acme-ml";
  c.ledger.records = {a};
  c.caches[Kind::Ledger].synced = false;
  EXPECT_TRUE(projectCaps(c).empty());
}

TEST_F(Quota, AcceleratorStatusComesFromHncsHardAndUsed) {
  HierarchicalResourceQuota q;
  q.ns = "acme";
  q.name = "plan-quota";
  q.hard = {{kH200Key, 3}, {kGpuKey, 4}, {kMemKey, 32768}, {kCoresKey, 100}};
  q.hard.set(kVgpuKey, 0);  // Tally's zero for a key nobody granted
  q.statusHard = q.hard;
  q.statusUsed = {{kH200Key, 2}, {kGpuKey, 1}, {kMemKey, 8192}, {kCoresKey, 25}};
  put(c, q);
  auto status = acceleratorStatus(c, acme());
  ASSERT_TRUE(status);
  EXPECT_EQ(status->at("h200").devices, (HardUsed{3, 2}));
  EXPECT_FALSE(status->at("h200").shares);
  EXPECT_EQ(status->at("a100-10c").devices, (HardUsed{0, 0}));
  EXPECT_EQ(status->at("v100-8g").shares, (HardUsed{4, 1}));
  EXPECT_EQ(status->at("v100-8g").memoryMiB, (HardUsed{32768, 8192}));
  EXPECT_EQ(status->at("v100-8g").corePercent, (HardUsed{100, 25}));
  EXPECT_FALSE(status->at("v100-8g").devices);
}

TEST_F(Quota, AcceleratorStatusReadsStatusNotSpec) {
  put(c, hrq("acme", "plan-quota", kH200Key, 3));
  c.hrqs.at("acme/plan-quota").statusHard = {{kH200Key, 1}};  // HNC has not caught up
  EXPECT_EQ(acceleratorStatus(c, acme())->at("h200").devices, (HardUsed{1, 0}));
}

TEST_F(Quota, AcceleratorStatusIsUnknownWithoutHncsReport) {
  EXPECT_FALSE(acceleratorStatus(c, acme()));
  HierarchicalResourceQuota q;
  q.ns = "acme";
  q.name = "plan-quota";
  q.hard = {{kH200Key, 3}};
  put(c, q);
  EXPECT_FALSE(acceleratorStatus(c, acme()));
}

// --- The seed's assignment procedure: a pending record's own grant -----------

struct PendingHold : Quota {
  void SetUp() override {
    Quota::SetUp();
    acme().addons = {{"h200-reserved", 2}};
    put(c, hrq("acme", "plan-quota", kH200Key, 2));
    put(c, hrq("globex", "plan-quota", kH200Key, 0));
    c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
    c.ledger.records.push_back(record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending));
    // The pending transaction freezes creation in the pool (not a failure).
    c.classes.at("h200").gateOpen = false;
    c.classes.at("h200").gateReason = "reservation gpu-res-2 is pending";
  }
  Decision change(const std::string& orgKey, std::vector<AddonAssignment> addons) {
    Organization after = c.organizations.at(orgKey);
    after.addons = std::move(addons);
    TotalsCapacityView view(c, computeUsage(c));
    return checkAddonChange(c, view, c.organizations.at(orgKey), after);
  }
};

TEST_F(PendingHold, ThePendingRecordsOwnAddonIsAdmittedWhileItsTransactionClosesTheGate) {
  Decision d = change("acme/acme", {{"h200-reserved", 3}});
  EXPECT_TRUE(d.allowed()) << d.summary();
  EXPECT_FALSE(grantDuringTransaction(c, acme(), Organization{acme().ns, acme().name, {{"h200-reserved", 3}}, {}},
                                      c.classes.at("h200")));
}

TEST_F(PendingHold, MoreThanThePendingAndActiveRecordsReserveIsRefused) {
  Decision d = change("acme/acme", {{"h200-reserved", 4}});
  EXPECT_TRUE(hasCode(d, Code::TransactionInFlight)) << d.summary();
  EXPECT_NE(d.summary().find("reserve 3"), std::string::npos) << d.summary();
}

TEST_F(PendingHold, AnotherOrganizationsGrantInThePoolIsASecondTransaction) {
  c.organizations.at("globex/globex").addons = {};
  Decision d = change("globex/globex", {{"h200-quota", 1}});
  EXPECT_TRUE(hasCode(d, Code::TransactionInFlight)) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-2"), std::string::npos) << d.summary();
}

TEST_F(PendingHold, ThePendingOrganizationsPlainAddonMayNotGrowAlongside) {
  Decision d = change("acme/acme", {{"h200-reserved", 3}, {"h200-quota", 1}});
  EXPECT_TRUE(hasCode(d, Code::TransactionInFlight)) << d.summary();
}

TEST_F(PendingHold, GrantsInOtherPoolsAreNotFrozen) {
  Decision d = change("globex/globex", {{"a100-slice", 1}});
  EXPECT_FALSE(hasCode(d, Code::TransactionInFlight)) << d.summary();
}

TEST_F(PendingHold, NoGrantGrowsWhileARecordIsReleasing) {
  c.ledger.records = {record("gpu-res-1", "acme", "h200", 2, ReservationState::Releasing)};
  Decision d = change("acme/acme", {{"h200-reserved", 3}});
  EXPECT_TRUE(hasCode(d, Code::TransactionInFlight)) << d.summary();
  EXPECT_NE(d.summary().find("releasing"), std::string::npos) << d.summary();
}

TEST_F(PendingHold, AFailedAuditRefusesEvenThePendingRecordsGrant) {
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  Decision d = change("acme/acme", {{"h200-reserved", 3}});
  EXPECT_TRUE(hasCode(d, Code::GateClosed)) << d.summary();
}

// --- The runbook's release: a reservation add-on outlives its records --------

struct ActiveReservation : Quota {
  void SetUp() override {
    Quota::SetUp();
    acme().addons = {{"h200-quota", 1}, {"h200-reserved", 2}};
    put(c, hrq("acme", "plan-quota", kH200Key, 3));
    c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
  }
  Decision change(std::vector<AddonAssignment> addons) {
    Organization after = acme();
    after.addons = std::move(addons);
    TotalsCapacityView view(c, computeUsage(c));
    return checkAddonChange(c, view, acme(), after);
  }
};

TEST_F(ActiveReservation, RemovingTheAddonOfAnActiveRecordIsRefusedNamingTheRecordAndTheRelease) {
  Decision d = change({{"h200-quota", 1}});
  ASSERT_TRUE(hasCode(d, Code::AddonReductionBlocked)) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-1 (active, 2 device(s))"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("releasing"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("then remove the add-on"), std::string::npos) << d.summary();
  // Once the ledger says releasing, the removal is the runbook's step 4.
  c.ledger.records.front().state = ReservationState::Releasing;
  EXPECT_TRUE(change({{"h200-quota", 1}}).allowed()) << change({{"h200-quota", 1}}).summary();
}

TEST_F(ActiveReservation, LoweringTheAddonBelowWhatItsRecordsReserveIsRefused) {
  c.ledger.records.push_back(record("gpu-res-2", "acme", "h200", 1, ReservationState::Active));
  acme().addons = {{"h200-quota", 1}, {"h200-reserved", 3}};
  Decision d = change({{"h200-quota", 1}, {"h200-reserved", 2}});
  ASSERT_TRUE(hasCode(d, Code::AddonReductionBlocked)) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-1"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-2"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("reserve 3"), std::string::npos) << d.summary();
  // One of them released: the add-on may shrink to what the other reserves.
  c.ledger.records.back().state = ReservationState::Released;
  EXPECT_TRUE(change({{"h200-quota", 1}, {"h200-reserved", 2}}).allowed());
}

TEST_F(ActiveReservation, RemovingTheAddonOfAPendingRecordIsRefusedUntilItIsCanceled) {
  c.ledger.records = {record("gpu-res-1", "acme", "h200", 2, ReservationState::Pending)};
  Decision d = change({{"h200-quota", 1}});
  ASSERT_TRUE(hasCode(d, Code::AddonReductionBlocked)) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-1 (pending, 2 device(s))"), std::string::npos) << d.summary();
  EXPECT_NE(d.summary().find("canceled"), std::string::npos) << d.summary();
  c.ledger.records.front().state = ReservationState::Canceled;
  EXPECT_TRUE(change({{"h200-quota", 1}}).allowed());
}

TEST_F(ActiveReservation, AnUnreadLedgerRefusesTheRemovalClosed) {
  c.caches[Kind::Ledger].synced = false;
  Decision d = change({{"h200-quota", 1}});
  EXPECT_TRUE(hasCode(d, Code::CacheNotSynced)) << d.summary();
  EXPECT_NE(d.summary().find("h200-reserved"), std::string::npos) << d.summary();
}

// --- Organization CREATE: the same review as an UPDATE adding the add-ons ----

struct CreatedOrganization : Quota {
  void SetUp() override {
    Quota::SetUp();
    c.organizations.erase("globex/globex");
    put(c, hrq("acme", "plan-quota", kH200Key, 0));
  }
  Decision create(std::vector<AddonAssignment> addons) {
    TotalsCapacityView view(c, computeUsage(c));
    return checkOrganizationCreate(c, view, Organization{"globex", "globex", std::move(addons), {}});
  }
};

TEST_F(CreatedOrganization, AddonsThatBreakThePoolInvariantAreRefused) {
  // 8 healthy, spare 1: 7 to sell.
  Decision d = create({{"h200-quota", 8}});
  EXPECT_TRUE(hasCode(d, Code::InvariantBroken)) << d.summary();
  EXPECT_NE(d.summary().find("organization globex"), std::string::npos) << d.summary();
  EXPECT_TRUE(create({{"h200-quota", 7}}).allowed()) << create({{"h200-quota", 7}}).summary();
}

TEST_F(CreatedOrganization, AddonsInAPoolClosedByAFailedAuditAreRefused) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  Decision d = create({{"h200-quota", 1}});
  EXPECT_TRUE(hasCode(d, Code::GateClosed)) << d.summary();
  EXPECT_FALSE(hasCode(create({{"a100-slice", 1}}), Code::GateClosed));
}

TEST_F(CreatedOrganization, AddonsDuringAnotherOrganizationsTransactionAreRefused) {
  c.ledger.records.push_back(record("gpu-res-2", "acme", "h200", 1, ReservationState::Pending));
  Decision d = create({{"h200-quota", 1}});
  EXPECT_TRUE(hasCode(d, Code::TransactionInFlight)) << d.summary();
  EXPECT_NE(d.summary().find("gpu-res-2"), std::string::npos) << d.summary();
}

TEST_F(CreatedOrganization, AnAddonTheCatalogueDoesNotDefineIsRefused) {
  EXPECT_TRUE(hasCode(create({{"mystery", 1}}), Code::AddonUnknown));
}

}  // namespace
}  // namespace tally::model
