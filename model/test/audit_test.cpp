#include <gtest/gtest.h>

#include <set>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/report.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct AuditedPool : ::testing::Test {
  Cluster c = syncedCluster();
  const std::string key = quotaKey(kH200);
  void SetUp() override {
    auto cls = passthroughClass();
    cls.pciVendorSelector = "10DE:2335";
    put(c, cls);
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    put(c, gpuNode("gpu-2", NodeMode::VmPassthrough, kH200, 4));
    Addon reserved;
    reserved.id = "h200-reserved";
    reserved.selfService = false;
    reserved.gpu["h200"] = GpuGrant{1, 0, 0, 0};
    c.plans->addons[reserved.id] = reserved;
    put(c, org("acme", {{"h200-reserved", 2}}));
    put(c, hrq("acme", "plan-quota", key, 2));
    c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{2, 0};
    c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 2, ReservationState::Active));
    c.permittedHostDevices = std::vector{PermittedHostDevice{std::string(kH200), "10DE:2335", false, false}};
  }
  std::vector<FindingCode> codes() {
    std::vector<FindingCode> out;
    for (const auto& f : auditPool(c, c.classes.at("h200"))) out.push_back(f.code);
    return out;
  }
  bool has(FindingCode code) {
    auto all = codes();
    return std::find(all.begin(), all.end(), code) != all.end();
  }
};

TEST_F(AuditedPool, CleanPoolHasNoFindings) { EXPECT_TRUE(codes().empty()); }

// HNC writes status.hard after Tally rewrote spec.hard: for a while the two
// disagree. That moment closes the gate, but it is no failure to acknowledge.
TEST_F(AuditedPool, AFreshStatusDisagreementClosesTheGateUntilItConverges) {
  c.hrqs.at("acme/plan-quota").statusHard.set(key, 1);
  std::map<std::string, Timestamp> firstSeen;
  AuditOptions options;
  options.firstSeen = &firstSeen;
  auto findings = auditPool(c, c.classes.at("h200"), options);
  ASSERT_FALSE(findings.empty());
  EXPECT_TRUE(std::all_of(findings.begin(), findings.end(), [](const Finding& f) { return f.converging; }));
  GateState gate = evaluateGate(c, c.classes.at("h200"), findings);
  EXPECT_FALSE(gate.open);
  EXPECT_TRUE(gate.converging);
  EXPECT_EQ(gate.why, GateReason::Converging);
  EXPECT_TRUE(gate.failureId.empty()) << "converging is no failure";
  EXPECT_FALSE(gate.failed());

  c.hrqs.at("acme/plan-quota").statusHard.set(key, 2);
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), auditPool(c, c.classes.at("h200"), options)).open)
      << "reopens by itself, no acknowledgement";
}

TEST_F(AuditedPool, AStatusDisagreementThatOutlastsTheBoundIsAFailure) {
  c.hrqs.at("acme/plan-quota").statusHard.set(key, 1);
  AuditOptions options;
  options.convergenceSeconds = 60;
  std::map<std::string, Timestamp> firstSeen;
  options.firstSeen = &firstSeen;
  for (const auto& f : auditPool(c, c.classes.at("h200"), options)) firstSeen[findingKey(f)] = c.now - 61;
  auto findings = auditPool(c, c.classes.at("h200"), options);
  EXPECT_TRUE(std::none_of(findings.begin(), findings.end(), [](const Finding& f) { return f.converging; }));
  GateState gate = evaluateGate(c, c.classes.at("h200"), findings);
  EXPECT_TRUE(gate.failed());
  EXPECT_EQ(gate.why, GateReason::AuditFailed);
  EXPECT_FALSE(gate.failureId.empty());

  firstSeen.clear();
  for (const auto& f : auditPool(c, c.classes.at("h200"), options)) firstSeen[findingKey(f)] = c.now - 59;
  EXPECT_FALSE(evaluateGate(c, c.classes.at("h200"), auditPool(c, c.classes.at("h200"), options)).failed());
}

TEST_F(AuditedPool, NonConvergentFindingsFailAtOnce) {
  c.ledger.records.clear();  // a reservation add-on without its record
  std::map<std::string, Timestamp> firstSeen;
  AuditOptions options;
  options.firstSeen = &firstSeen;
  auto findings = auditPool(c, c.classes.at("h200"), options);
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), findings).failed());
}

TEST_F(AuditedPool, ReservationAddonWithoutLedgerRecordFails) {
  c.ledger.records.clear();
  EXPECT_TRUE(has(FindingCode::MissingLedgerRecord));
}

TEST_F(AuditedPool, UnknownAddonFails) {
  c.organizations.at("acme/acme").addons.push_back({"mystery", 1});
  EXPECT_TRUE(has(FindingCode::UnknownAddon));
}

TEST_F(AuditedPool, UnsyncedCacheIsStaleCapacity) {
  c.caches[Kind::Node].synced = false;
  EXPECT_TRUE(has(FindingCode::StaleCapacity));
}

TEST_F(AuditedPool, OldCacheIsStaleCapacity) {
  c.caches[Kind::Pod].lastSynced = c.now - 3600;
  EXPECT_TRUE(has(FindingCode::StaleCapacity));
}

// An audit of an unchanged snapshot later on (a periodic one, or when a
// cache is due to become stale) is dated by the auditor's clock, not by when
// the snapshot was copied: what has not been confirmed since is stale, and a
// lag first seen then has lasted since.
TEST_F(AuditedPool, TheAuditsOwnTimeDatesStalenessAndConvergence) {
  AuditOptions options;
  options.staleAfterSeconds = 20;
  options.now = c.now + 21;
  auto stale = auditPool(c, c.classes.at("h200"), options);
  EXPECT_TRUE(
      std::any_of(stale.begin(), stale.end(), [](const Finding& f) { return f.code == FindingCode::StaleCapacity; }));
  options.now = c.now + 19;
  auto fresh = auditPool(c, c.classes.at("h200"), options);
  EXPECT_TRUE(
      std::none_of(fresh.begin(), fresh.end(), [](const Finding& f) { return f.code == FindingCode::StaleCapacity; }));

  c.hrqs.at("acme/plan-quota").statusHard.set(key, 1);
  options.staleAfterSeconds = 3600;
  options.convergenceSeconds = 60;
  std::map<std::string, Timestamp> firstSeen;
  options.firstSeen = &firstSeen;
  options.now = c.now + 1000;
  for (const auto& f : auditPool(c, c.classes.at("h200"), options)) firstSeen[findingKey(f)] = c.now + 1000;
  options.now = c.now + 1061;  // the snapshot's own time is still c.now
  auto findings = auditPool(c, c.classes.at("h200"), options);
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), findings).failed());
}

TEST_F(AuditedPool, HardQuotaAboveTheEquationFails) {
  put(c, org("beta"));
  put(c, hrq("beta", "plan-quota", key, 6));
  EXPECT_TRUE(has(FindingCode::HardQuotaAboveCapacity));
}

TEST_F(AuditedPool, DuplicateReservationIdFails) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, ReservationState::Pending));
  EXPECT_TRUE(has(FindingCode::DuplicateReservationId));
}

TEST_F(AuditedPool, NodeWithMismatchedModesIsAProfileModeMismatch) {
  c.nodes.at("gpu-2").activeMode = NodeMode::PodHami;
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
}

TEST_F(AuditedPool, DeviceKubeVirtDoesNotPermitIsAProfileModeMismatch) {
  c.permittedHostDevices->front().selector = "10DE:2330";
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
  c.permittedHostDevices->clear();
  EXPECT_TRUE(has(FindingCode::ProfileModeMismatch));
}

TEST_F(AuditedPool, FiringAlertFails) {
  c.alerts.push_back({"GPUXidErrors", "h200"});
  EXPECT_TRUE(has(FindingCode::ActiveAlert));
  c.alerts = {{"Other", "a100-10c"}};
  EXPECT_FALSE(has(FindingCode::ActiveAlert));
}

TEST_F(AuditedPool, OrganizationStatusDisagreeingWithHrqFails) {
  c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{5, 0};
  EXPECT_TRUE(has(FindingCode::StatusDisagreement));
}

// B7: a status that lacks the pool's profile was never compared at all.
TEST_F(AuditedPool, OrganizationStatusWithoutThePoolsProfileDisagreesWithTheHrq) {
  c.organizations.at("acme/acme").acceleratorStatus.clear();
  auto findings = auditPool(c, c.classes.at("h200"));
  auto it = std::find_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.code == FindingCode::StatusDisagreement && f.subject == "organization/acme/status";
  });
  ASSERT_NE(it, findings.end());
  EXPECT_NE(it->message.find("reports no hard quota for h200"), std::string::npos) << it->message;
  EXPECT_FALSE(evaluateGate(c, c.classes.at("h200"), findings).open);

  c.organizations.at("acme/acme").acceleratorStatus["h200"].devices = HardUsed{2, 0};
  EXPECT_FALSE(has(FindingCode::StatusDisagreement));
}

TEST_F(AuditedPool, ActiveRecordAboveHrqHardFails) {
  c.hrqs.at("acme/plan-quota").hard.set(key, 1);
  EXPECT_TRUE(has(FindingCode::StatusDisagreement));
}

TEST_F(AuditedPool, MoreThanOneTransactionInFlightFails) {
  c.ledger.records.push_back(record("gpu-res-2", "beta", "h200", 1, ReservationState::Pending));
  EXPECT_FALSE(has(FindingCode::MultipleTransactions));
  const GateState frozen = evaluateGate(c, c.classes.at("h200"), auditPool(c, c.classes.at("h200")));
  EXPECT_FALSE(frozen.open);
  EXPECT_EQ(frozen.why, GateReason::TransactionInFlight);
  EXPECT_EQ(frozen.transaction, "gpu-res-2");
  c.ledger.records.push_back(record("gpu-res-3", "gamma", "h200", 1, ReservationState::Releasing));
  EXPECT_TRUE(has(FindingCode::MultipleTransactions));
}

TEST_F(AuditedPool, InvalidRecordOfThePoolFails) {
  c.ledger.invalid.push_back({"bad.yaml", "gpu-res-9", "h200", {{Code::RecordSchema, "broken"}}});
  EXPECT_TRUE(has(FindingCode::InvalidRecord));
  c.ledger.invalid.back().profileId = "a100-10c";
  EXPECT_FALSE(has(FindingCode::InvalidRecord));
}

TEST_F(AuditedPool, VanishedRecordOfThePoolIsAMissingLedgerRecordNamingItAndItsFile) {
  c.ledger.history.push_back({"acme/gpu-res-0.yaml", "gpu-res-0", LedgerRule::Disappeared, "gone", "h200"});
  auto findings = auditPool(c, c.classes.at("h200"));
  auto it = std::find_if(findings.begin(), findings.end(),
                         [](const Finding& f) { return f.code == FindingCode::MissingLedgerRecord; });
  ASSERT_NE(it, findings.end());
  EXPECT_EQ(it->subject, "record/gpu-res-0");
  EXPECT_NE(it->message.find("acme/gpu-res-0.yaml"), std::string::npos) << it->message;
  c.ledger.history.back().profileId = "a100-10c";
  EXPECT_FALSE(has(FindingCode::MissingLedgerRecord));
  c.ledger.history.back().profileId = "";  // pool unknown: every pool
  EXPECT_TRUE(has(FindingCode::MissingLedgerRecord));
}

TEST_F(AuditedPool, ForbiddenTransitionIsAnInvalidRecord) {
  c.ledger.history.push_back({"gpu-res-1.yaml", "gpu-res-1", LedgerRule::Transition, "active to pending", "h200"});
  EXPECT_TRUE(has(FindingCode::InvalidRecord));
}

TEST_F(AuditedPool, FailedLedgerReadFailsClosedOnTheKeptRevision) {
  c.ledger.readError = LedgerReadError{"/ledger", "changed while it was read"};
  auto findings = auditPool(c, c.classes.at("h200"));
  auto it = std::find_if(findings.begin(), findings.end(),
                         [](const Finding& f) { return f.code == FindingCode::InvalidRecord; });
  ASSERT_NE(it, findings.end());
  EXPECT_EQ(it->subject, "ledger//ledger");
  EXPECT_FALSE(has(FindingCode::MissingLedgerRecord));  // the kept records still hold
}

// Issue 26's node: 8 served, 4 held by the GPUDevices of a stopped VM, and a
// pod another scheduler put there asking 5: 9 in use on 8 units.
struct OvercommittedNode : AuditedPool {
  void SetUp() override {
    AuditedPool::SetUp();
    put(c, gpuNode("gpu-h200-0", NodeMode::VmPassthrough, kH200, 8));
    put(c, device("acme", "stopped-vm-gpus", "h200", 4, DevicePhase::Bound, "gpu-h200-0"));
    put(c, gpuPod("outsider", "rogue", kH200, 5, "gpu-h200-0"));
  }
  const Finding* overcommit(const std::vector<Finding>& findings) {
    auto it = std::find_if(findings.begin(), findings.end(), [](const Finding& f) {
      return toString(f.code) == "NodeOvercommitted" && f.subject == "node/gpu-h200-0";
    });
    return it == findings.end() ? nullptr : &*it;
  }
};

TEST_F(OvercommittedNode, UsedPlusHeldAboveServedIsAFindingNamingTheNodeTheFiguresAndTheHolders) {
  auto findings = auditPool(c, c.classes.at("h200"));
  const Finding* f = overcommit(findings);
  ASSERT_NE(f, nullptr);
  for (std::string_view part :
       {"gpu-h200-0", "serves 8", "9 are in use", "4 held", "acme/stopped-vm-gpus (4)", "outsider/rogue (5)"}) {
    EXPECT_NE(f->message.find(part), std::string::npos) << part << " in " << f->message;
  }
  EXPECT_TRUE(failsClosed(f->code));
  GateState gate = evaluateGate(c, c.classes.at("h200"), findings);
  EXPECT_FALSE(gate.open);
  EXPECT_TRUE(gate.failed()) << "an audit failure (AuditFailed), not a lag";

  // A cordoned (or not Ready) node serves nothing by rule while its holders
  // drain: no over-commit. One that fits again clears the finding.
  c.nodes.at("gpu-h200-0").unschedulable = true;
  EXPECT_EQ(overcommit(auditPool(c, c.classes.at("h200"))), nullptr);
  c.nodes.at("gpu-h200-0").unschedulable = false;
  c.pods.at("outsider/rogue").phase = PodPhase::Succeeded;
  EXPECT_EQ(overcommit(auditPool(c, c.classes.at("h200"))), nullptr);
}

// The controller's snapshot keeps pods only as sums: the check reads the
// usage it is given.
TEST_F(OvercommittedNode, TheAuditReadsTheUsageItIsGivenWhenTheClusterHoldsNoPods) {
  TotalsCapacityView view(c, computeUsage(c));
  Cluster withoutPods = c.withoutPods();
  AuditOptions options;
  options.usage = &view;
  const Finding* f = nullptr;
  auto findings = auditPool(withoutPods, withoutPods.classes.at("h200"), options);
  f = overcommit(findings);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->message.find("5 by pods"), std::string::npos) << f->message;
}

TEST_F(OvercommittedNode, TheReportSaysSoInTheNodesNote) {
  Report report = buildReport(c);
  auto row = std::find_if(report.nodes.begin(), report.nodes.end(),
                          [](const NodeReport& n) { return n.name == "gpu-h200-0"; });
  ASSERT_NE(row, report.nodes.end());
  EXPECT_EQ(row->unitsServed, 8);
  EXPECT_EQ(row->unitsUsed, 9);
  EXPECT_NE(row->reason.find("OVERCOMMITTED"), std::string::npos) << row->reason;
  auto pool =
      std::find_if(report.pools.begin(), report.pools.end(), [](const PoolReport& p) { return p.pool == "h200"; });
  ASSERT_NE(pool, report.pools.end());
  EXPECT_NE(overcommit(pool->findings), nullptr);
  EXPECT_FALSE(pool->gate.open);
}

Cluster gateCluster(DeviceClass cls, Timestamp now = 1000) {
  Cluster c = syncedCluster(now);
  put(c, std::move(cls));
  return c;
}

TEST(Gate, FailingAuditClosesTheGateWithAFailureIdDerivedFromTheFindings) {
  Cluster c = gateCluster(passthroughClass());
  const auto& cls = c.classes.at("h200");
  std::vector<Finding> alert = {{FindingCode::ActiveAlert, "alert X is firing", "alert/X"}};
  auto gate = evaluateGate(c, cls, alert);
  EXPECT_FALSE(gate.open);
  EXPECT_TRUE(gate.failed());
  EXPECT_TRUE(gate.failureId.starts_with("h200-")) << gate.failureId;
  EXPECT_TRUE(gate.failureId.ends_with("-1000")) << gate.failureId;
  // Another failure gets another id; the same findings with other figures in
  // their messages keep it.
  std::vector<Finding> other = {{FindingCode::StaleCapacity, "the Pod cache was last confirmed 400s ago", "cache/Pod"}};
  EXPECT_NE(evaluateGate(c, cls, other).failureId, gate.failureId);
  std::vector<Finding> reworded = {{FindingCode::ActiveAlert, "alert X is firing (again)", "alert/X"}};
  EXPECT_EQ(evaluateGate(c, cls, reworded).failureId, gate.failureId);
}

TEST(Gate, TheSameFailureKeepsItsPublishedIdWhileItLasts) {
  Cluster c = gateCluster(passthroughClass(), 1000);
  std::vector<Finding> alert = {{FindingCode::ActiveAlert, "alert X is firing", "alert/X"}};
  std::string first = evaluateGate(c, c.classes.at("h200"), alert).failureId;
  c.now = 5000;
  auto& cls = c.classes.at("h200");
  cls.gateOpen = false;
  cls.gateFailureId = first;
  EXPECT_EQ(evaluateGate(c, cls, alert).failureId, first);
  // Once it reopened, the same findings later are a new failure with a new id.
  cls.gateOpen = true;
  EXPECT_NE(evaluateGate(c, cls, alert).failureId, first);
}

TEST(Gate, StaysClosedAfterFindingsClearUntilProductAndSreAcknowledge) {
  Cluster c = gateCluster(passthroughClass(), 2000);
  auto& cls = c.classes.at("h200");
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1000";
  EXPECT_FALSE(evaluateGate(c, cls, {}).open);
  // Told by the reason, not by the wording of its message.
  EXPECT_EQ(evaluateGate(c, cls, {}).why, GateReason::AwaitingAcknowledgement);
  cls.acknowledgements.push_back({"h200-1000", "product", "pat"});
  EXPECT_FALSE(evaluateGate(c, cls, {}).open);
  cls.acknowledgements.push_back({"h200-1000", "sre", "pat"});  // same person twice
  EXPECT_FALSE(evaluateGate(c, cls, {}).open);
  cls.acknowledgements.push_back({"h200-999", "sre", "sam"});  // another failure
  EXPECT_FALSE(evaluateGate(c, cls, {}).open);
  cls.acknowledgements.push_back({"h200-1000", "sre", "sam"});
  EXPECT_TRUE(evaluateGate(c, cls, {}).open);
  EXPECT_EQ(evaluateGate(c, cls, {}).why, GateReason::Open);
  cls.creationPaused = true;
  EXPECT_EQ(evaluateGate(c, cls, {}).why, GateReason::Paused);
}

TEST(Gate, EveryReasonHasItsConditionWord) {
  EXPECT_EQ(toString(GateReason::Open), "Open");
  EXPECT_EQ(toString(GateReason::AuditFailed), "AuditFailed");
  EXPECT_EQ(toString(GateReason::AwaitingAcknowledgement), "AwaitingAcknowledgement");
  EXPECT_EQ(toString(GateReason::Converging), "Converging");
  EXPECT_EQ(toString(GateReason::Paused), "Paused");
  EXPECT_EQ(toString(GateReason::TransactionInFlight), "TransactionInFlight");
  EXPECT_EQ(toString(GateReason::NotAudited), "NotAudited");
}

TEST(Codes, EveryCodeBelowTheCountHasItsOwnNameAndNoneLiesPastIt) {
  std::set<std::string_view> names;
  for (std::size_t c = 0; c < kCodeCount; ++c) {
    const std::string_view name = toString(static_cast<Code>(c));
    EXPECT_NE(name, "Unknown") << "code " << c;
    EXPECT_TRUE(names.insert(name).second) << name << " names two codes";
  }
  EXPECT_EQ(toString(Code::kCount), "Unknown");
  EXPECT_EQ(toString(Code::RecordDuplicate), "RecordDuplicate");
}

TEST(Gate, AnyProductIdentityPairsWithAnyDifferentSreIdentity) {
  // Greedy matching took product pat first and then refused sre pat, missing the
  // valid pair product sam + sre pat.
  Cluster c = gateCluster(passthroughClass(), 2000);
  auto& cls = c.classes.at("h200");
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1000";
  cls.acknowledgements = {
      {"h200-1000", "product", "pat"}, {"h200-1000", "product", "sam"}, {"h200-1000", "sre", "pat"}};
  EXPECT_TRUE(evaluateGate(c, cls, {}).open);
  cls.acknowledgements = {{"h200-1000", "sre", "pat"}, {"h200-1000", "product", "pat"}};
  auto gate = evaluateGate(c, cls, {});
  EXPECT_FALSE(gate.open);
  EXPECT_NE(gate.reason.find("two different identities"), std::string::npos) << gate.reason;
}

TEST(Gate, AcknowledgementsOfOneFailureDoNotReopenAfterAnother) {
  Cluster c = gateCluster(passthroughClass(), 1000);
  std::vector<Finding> alert = {{FindingCode::ActiveAlert, "alert X is firing", "alert/X"}};
  std::vector<Finding> stale = {{FindingCode::StaleCapacity, "stale", "cache/Node"}};
  auto& cls = c.classes.at("h200");
  std::string first = evaluateGate(c, cls, alert).failureId;
  cls.acknowledgements = {{first, "product", "pat"}, {first, "sre", "sam"}};
  // A different failure came and went: the class published its id.
  cls.gateOpen = false;
  cls.gateFailureId = evaluateGate(c, cls, stale).failureId;
  ASSERT_NE(cls.gateFailureId, first);
  EXPECT_FALSE(evaluateGate(c, cls, {}).open);
}

TEST(Gate, AcknowledgementsDoNotOpenAGateWhileFindingsRemain) {
  Cluster c = gateCluster(passthroughClass(), 2000);
  auto& cls = c.classes.at("h200");
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1000";
  cls.acknowledgements = {{"h200-1000", "product", "pat"}, {"h200-1000", "sre", "sam"}};
  auto gate = evaluateGate(c, cls, {{FindingCode::StaleCapacity, "stale", "cache/Pod"}});
  EXPECT_FALSE(gate.open);
}

TEST(Gate, InformationalFindingsDoNotClose) {
  Cluster c = gateCluster(sharedClass());
  EXPECT_TRUE(
      evaluateGate(c, c.classes.at("v100-8g"), {{FindingCode::SharedNodeWithoutInventory, "no inventory", "node/x"}})
          .open);
}

TEST(Gate, PendingRecordClosesCreationUntilTheTransactionEnds) {
  Cluster c = gateCluster(passthroughClass());
  c.ledger.records.push_back(record("gpu-res-7", "acme", "h200", 1, ReservationState::Pending));
  auto gate = evaluateGate(c, c.classes.at("h200"), {});
  EXPECT_FALSE(gate.open);
  EXPECT_FALSE(gate.failed()) << "a transaction freezes creation, it is no failure: grants stay possible";
  EXPECT_EQ(gate.transaction, "gpu-res-7");
  c.ledger.records.back() = record("gpu-res-7", "acme", "h200", 1, ReservationState::Active);
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), {}).open) << "reopens by itself";
}

TEST(Gate, ReleasingRecordClosesCreation) {
  Cluster c = gateCluster(passthroughClass());
  auto r = record("gpu-res-7", "acme", "h200", 1, ReservationState::Releasing);
  c.ledger.records.push_back(r);
  EXPECT_FALSE(evaluateGate(c, c.classes.at("h200"), {}).open);
  r.state = ReservationState::Released;
  r.releasedAt = r.activatedAt.value() + 10;
  c.ledger.records.back() = r;
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), {}).open);
}

TEST(Gate, ClassMayOptOutOfTheTransactionFreeze) {
  auto cls = passthroughClass();
  cls.keepCreationOpenDuringTransactions = true;
  Cluster c = gateCluster(cls);
  c.ledger.records.push_back(record("gpu-res-7", "acme", "h200", 1, ReservationState::Pending));
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), {}).open);
}

TEST(Gate, OperatorPauseClosesCreation) {
  auto cls = passthroughClass();
  cls.creationPaused = true;
  Cluster c = gateCluster(cls);
  auto gate = evaluateGate(c, c.classes.at("h200"), {});
  EXPECT_FALSE(gate.open);
  EXPECT_TRUE(gate.paused);
  EXPECT_FALSE(gate.failed());
}

TEST(Gate, TransactionInOtherPoolLeavesThisOneOpen) {
  Cluster c = gateCluster(passthroughClass());
  c.ledger.records.push_back(record("gpu-res-7", "acme", "other", 1, ReservationState::Pending));
  EXPECT_TRUE(evaluateGate(c, c.classes.at("h200"), {}).open);
}

// SPEC 3.5 at the doors: what a door applies is the published decision, closed
// while none is published, and closed at once by the pool's spec and ledger.
TEST_F(AuditedPool, DoorsCloseAPoolNoAuditorDecidedAndApplyPausesAndTransactionsThemselves) {
  DeviceClass& cls = c.classes.at("h200");
  cls.gateDecided = false;
  GateState gate = doorGates(c, GateSource::Published).at("h200");
  EXPECT_FALSE(gate.open);
  EXPECT_NE(gate.reason.find("pool h200 is not audited yet"), std::string::npos) << gate.reason;

  cls.gateDecided = true;
  cls.gateOpen = true;
  EXPECT_TRUE(doorGates(c, GateSource::Published).at("h200").open);
  cls.creationPaused = true;
  gate = doorGates(c, GateSource::Published).at("h200");
  EXPECT_FALSE(gate.open);
  EXPECT_TRUE(gate.paused);
  cls.creationPaused = false;
  c.ledger.records.push_back(record("gpu-res-9", "acme", "h200", 1, ReservationState::Pending));
  gate = doorGates(c, GateSource::Published).at("h200");
  EXPECT_FALSE(gate.open);
  EXPECT_EQ(gate.transaction, "gpu-res-9");
  cls.keepCreationOpenDuringTransactions = true;
  EXPECT_TRUE(doorGates(c, GateSource::Published).at("h200").open);

  // A published closed gate stays closed with its failure id, and the copy
  // the doors read carries it.
  cls.gateOpen = false;
  cls.gateFailureId = "h200-f";
  cls.gateReason = "a finding";
  Cluster copy = c;
  applyDoorGates(copy, doorGates(c, GateSource::Published));
  EXPECT_FALSE(copy.classes.at("h200").gateOpen);
  EXPECT_EQ(gateClosedMessage(copy.classes.at("h200")),
            "creation in pool h200 is closed by a failed audit (h200-f); existing holders keep their GPUs");
}

// Without an auditor the doors run the audit and the gate function themselves:
// the same answer the auditor would publish.
TEST_F(AuditedPool, EvaluatedDoorGatesAreTheAuditorsGateFunction) {
  DeviceClass& cls = c.classes.at("h200");
  cls.gateDecided = false;
  EXPECT_TRUE(doorGates(c, GateSource::Evaluated).at("h200").open);
  c.ledger.records.clear();  // the reservation add-on is now unexplained
  GateState gate = doorGates(c, GateSource::Evaluated).at("h200");
  EXPECT_EQ(gate, evaluateGate(c, cls, auditPool(c, cls)));
  EXPECT_FALSE(gate.open);
  EXPECT_NE(gate.reason.find("MissingLedgerRecord"), std::string::npos) << gate.reason;
}

TEST(AuditOverTime, AReleaseIsStuckAfterTheBoundFromWhenItWasFirstSeen) {
  Cluster c = syncedCluster();
  c.ledger.records.push_back(record("gpu-res-5", "acme", "h200", 1, ReservationState::Releasing));
  std::map<std::string, Timestamp> seen;
  EXPECT_TRUE(stuckReleases(c, "h200", seen, 1000, 60).empty());
  EXPECT_TRUE(stuckReleases(c, "h200", seen, 1060, 60).empty());
  EXPECT_EQ(stuckReleases(c, "h200", seen, 1061, 60), std::vector<std::string>{"gpu-res-5"});
  EXPECT_TRUE(stuckReleases(c, "other", seen, 1061, 60).empty());
  // Its end (the release start) earlier than the first sight counts.
  Cluster ended = c;
  ended.ledger.records[0].endsAt = 100;
  std::map<std::string, Timestamp> fresh;
  EXPECT_EQ(stuckReleases(ended, "h200", fresh, 1000, 60), std::vector<std::string>{"gpu-res-5"});
  // Released: forgotten.
  c.ledger.records[0].state = ReservationState::Released;
  EXPECT_TRUE(stuckReleases(c, "h200", seen, 2000, 60).empty());
  EXPECT_TRUE(seen.empty());
}

TEST(AuditOverTime, FindingsKeepTheirFirstSightingWhileFoundAndStartAgainWhenTheyReturn) {
  const Finding a{FindingCode::StaleCapacity, "cache Node is stale", "cache/Node", true};
  const Finding b{FindingCode::StaleCapacity, "cache Pod is stale", "cache/Pod", true};
  auto first = settleFindings({a}, {}, 100);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first.begin()->second, 100);
  auto second = settleFindings({a, b}, first, 150);
  EXPECT_EQ(second.at(findingKey(a)), 100);
  EXPECT_EQ(second.at(findingKey(b)), 150);
  auto gone = settleFindings({b}, second, 200);
  EXPECT_FALSE(gone.contains(findingKey(a)));
  EXPECT_EQ(settleFindings({a, b}, gone, 300).at(findingKey(a)), 300);
}

TEST(AuditOverTime, AnUnchangedPoolIsDueWhenAFindingFailsACacheGoesStaleOrAReleaseSticks) {
  Cluster c = syncedCluster();
  for (auto& [kind, cache] : c.caches) cache.lastSynced = 1000;
  AuditOptions o;
  o.staleAfterSeconds = 300;
  o.convergenceSeconds = 120;
  // Only the caches: each would be stale one second past the bound.
  EXPECT_EQ(auditDue(c, {}, 1000, o, {}), 1301);
  // A converging finding first seen at 1100 fails at 1221, before the caches.
  const Finding converging{FindingCode::StaleCapacity, "x", "cache/Node", true};
  const std::map<std::string, Timestamp> seen{{findingKey(converging), 1100}};
  EXPECT_EQ(auditDue(c, {converging}, 1150, o, {&seen, nullptr, nullptr, 0}), 1221);
  // A release releasing since 1010 sticks at 1071 with a bound of 60, unless reported already.
  const std::map<std::string, Timestamp> releasing{{"gpu-res-5", 1010}};
  const std::set<std::string> none, reported{"gpu-res-5"};
  EXPECT_EQ(auditDue(c, {}, 1020, o, {nullptr, &releasing, &none, 60}), 1071);
  EXPECT_EQ(auditDue(c, {}, 1020, o, {nullptr, &releasing, &reported, 60}), 1301);
  // Caches already stale, nothing else: nothing is due.
  EXPECT_FALSE(auditDue(c, {}, 2000, o, {}));
}

}  // namespace
}  // namespace tally::model
