#pragma once
// The audit (SPEC 3.5): per pool, fail closed on any finding; a failed audit
// closes the pool's creation gate until findings clear and two people ack.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"
#include "tally/model/gate.hpp"
#include "tally/model/pool.hpp"

namespace tally::model {

enum class FindingCode {
  MissingLedgerRecord,
  UnknownAddon,
  StaleCapacity,
  HardQuotaAboveCapacity,
  DuplicateReservationId,
  ProfileModeMismatch,
  ActiveAlert,
  StatusDisagreement,
  MultipleTransactions,
  InvalidRecord,
  QuotaUnknown,                // an organization with GPU add-ons whose HRQ plan-quota cannot be read
  UnattributedQuantity,        // a quantity no add-on, class or pool explains
  BothDevicePlugins,           // a node advertises a VM GPU resource and HAMi's nvidia.com/gpu
  DegradedHealth,              // capacity above allocatable, or an unhealthy GPU parent
  SharedNodeWithoutInventory,  // informational: such a node serves no shared units
  NodeOvercommitted,           // a node of the pool has more units in use than it serves (nodeOvercommit)
  LedgerNotConfigured,         // an organization holds a reservation add-on of the pool and no ledger is configured
  UnorganizedGpuUse,           // a namespace under no Organization uses units of the pool (TenancyPolicy refuses it)
  DraPoolIncomplete,           // a DRA pool of the class with slices of its newest generation not seen
  DevicePluginAndDra,          // a node serves the class's resource by a device plugin and the class by DRA
};
std::string_view toString(FindingCode code);
// Whether the finding closes the gate (every code but the informational ones).
bool failsClosed(FindingCode code);
// Whether the finding can be a moment of convergence rather than a fault: a
// status that lags the spec it reports (HNC's status.hard, the Organization's
// status), hard quota the quota controller has not rewritten yet, a plan-quota
// it has not created yet. Such a finding closes the gate at once, but becomes
// an audit failure (a failure id to acknowledge) only once it has lasted
// AuditOptions::convergenceSeconds.
bool convergent(FindingCode code);
// What clears a finding of this code, in a sentence an operator can act on
// (`tallyctl audit` prints it under each finding).
std::string_view remedy(FindingCode code);

struct Finding {
  FindingCode code;
  std::string message;
  // What the finding is about ("node/gpu-1", "record/gpu-res-4", "cache/Pod"):
  // with the code, what identifies a failure across audits (messages carry
  // figures that change from one audit to the next).
  std::string subject;
  // A convergent finding younger than the convergence bound: the gate is
  // closed while it lasts, and reopens by itself when it clears.
  bool converging = false;
  friend bool operator==(const Finding&, const Finding&) = default;
};

// What identifies a finding from one audit to the next: its code and subject.
std::string findingKey(const Finding& finding);

struct AuditOptions {
  Timestamp staleAfterSeconds = 300;   // caches older than this are stale
  Timestamp convergenceSeconds = 300;  // how long a convergent finding may last before it is a failure
  // When each finding (by findingKey) was first seen by the caller's earlier
  // audits; a finding it does not hold is first seen now. Null: no history
  // (an offline snapshot), every convergent finding is converging.
  const std::map<std::string, Timestamp>* firstSeen = nullptr;
  // The time of the audit, on the clock firstSeen and the caches' lastSynced
  // are on; unset: the cluster's (a snapshot's `now` is when it was copied,
  // which can be long before a periodic audit of an unchanged cluster).
  std::optional<Timestamp> now;
  // The node usage the over-commit check reads (the controller's snapshot
  // keeps pods only as sums); null: recomputed from the cluster's pods.
  const CapacityView* usage = nullptr;
};

std::vector<Finding> auditPool(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& options = {});

// --- What an auditor that runs over time keeps ------------------------------

// When each of `findings` was first seen, after an audit at `now`: kept from
// `before` for a finding still found, `now` for a new one; a finding no longer
// found is dropped (it starts again if it comes back).
std::map<std::string, Timestamp> settleFindings(const std::vector<Finding>& findings,
                                                const std::map<std::string, Timestamp>& before, Timestamp now);

// The reservation records of `pool` releasing longer than `afterSeconds` at
// `now`: `firstSeen` holds when the auditor first saw each record (by id) in
// releasing, and gains those it sees now; the record's endsAt counts as its
// release start when it is earlier. Ids no longer releasing are dropped.
std::vector<std::string> stuckReleases(const Cluster& cluster, const std::string& pool,
                                       std::map<std::string, Timestamp>& firstSeen, Timestamp now,
                                       std::int64_t afterSeconds);

// When an unchanged pool must be audited again, since nothing announces it:
// the first converging finding becoming a failure (`firstSeen` as settled,
// after options.convergenceSeconds), a synced cache becoming stale (after
// options.staleAfterSeconds without being confirmed current), a release
// becoming stuck (`releasingSince`, those already `reported` aside, after
// `releaseStuckAfter`); each one second past its bound. Empty: none is due.
struct AuditSchedule {
  const std::map<std::string, Timestamp>* firstSeen = nullptr;
  const std::map<std::string, Timestamp>* releasingSince = nullptr;
  const std::set<std::string>* reported = nullptr;
  std::int64_t releaseStuckAfter = 0;
};
std::optional<Timestamp> auditDue(const Cluster& cluster, const std::vector<Finding>& findings, Timestamp now,
                                  const AuditOptions& options, const AuditSchedule& schedule);

// The id of the failure a set of findings makes: the pool, a digest of the
// failing findings' codes and subjects, and when that failure began (kept from
// the class's published gateFailureId while the same failure lasts), so an
// acknowledgement binds to one failure and never reopens the gate after another.
std::string failureId(const DeviceClass& pool, const std::vector<Finding>& findings, Timestamp now);

// The creation gate of the pool, in this order:
//  * closed while failing findings exist (a failure: new grants are refused too);
//  * after a failure clears, closed until acknowledged: any "product" identity
//    and any "sre" identity different from it, both for the failure id;
//  * closed while converging findings exist; it reopens by itself when they clear;
//  * closed while the operator pauses creation (spec.creationPaused);
//  * closed while a reservation transaction (a pending or releasing record) is
//    in flight in the pool, unless spec.keepCreationOpenDuringTransactions;
//    it reopens by itself when the transaction ends;
//  * otherwise open.
GateState evaluateGate(const Cluster& cluster, const DeviceClass& pool, const std::vector<Finding>& findings);

// The gate as a door reads it from the class's published status, and its message.
std::string gateClosedMessage(const DeviceClass& pool);

// What closes the pool's gate on its spec and ledger alone, whatever an audit
// published: spec.creationPaused, and a reservation transaction (a pending or
// releasing record) in flight unless spec.keepCreationOpenDuringTransactions.
// Null when neither holds. evaluateGate applies the same rule after findings.
std::optional<GateState> closedBySpec(const Cluster& cluster, const DeviceClass& pool);

std::string_view toString(GateSource source);

// The message of a pool no auditor has decided yet.
std::string notAuditedMessage(const DeviceClass& pool);

// The gate every door applies, by pool, from the published fields of
// `cluster` (a cluster fresh from the caches, never one applyDoorGates wrote).
// `audit` is used by Evaluated only.
std::map<std::string, GateState> doorGates(const Cluster& cluster, GateSource source, const AuditOptions& audit = {});
// One pool's gate as the doors of `cluster.gates` apply it (doorGates' rule).
GateState doorGate(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& audit = {});
// Writes them into the classes of a snapshot's copy of the cluster (gateOpen,
// gateReason, gateFailureId), which is what every door reads.
void applyDoorGates(Cluster& cluster, const std::map<std::string, GateState>& gates);

}  // namespace tally::model
