#pragma once
// The creation gate of a pool (SPEC 3.4, 3.5): what every door reads before it
// admits or schedules a NEW GPU workload or device order there.

#include <string>
#include <string_view>

namespace tally::model {

// Where the doors of a binary take each pool's gate from (SPEC 3.5, fail closed):
enum class GateSource {
  // The auditor's published decision (status: CreationOpen, gateFailureId),
  // closed while none is published ("not audited yet"), and closed at once by
  // closedBySpec on the door's own snapshot, before the auditor's next write.
  Published,
  // No auditor runs (tally-controller --enable-pool-auditor=false, or a
  // tally-extender told so): the door evaluates the same gate function on its
  // snapshot, auditPool then evaluateGate. Nothing remembers a failure here,
  // so a cleared failure needs no acknowledgement: run the auditor for that.
  Evaluated,
};

// Why a gate stands as it does, for a condition's reason or a metric (the
// message says it to a person in `GateState::reason`).
enum class GateReason {
  Open,                     // audit clean (or a cleared failure acknowledged)
  AuditFailed,              // failing findings
  AwaitingAcknowledgement,  // findings cleared, the failure not acknowledged by product and sre
  Converging,               // only convergent findings younger than their bound
  Paused,                   // spec.creationPaused
  TransactionInFlight,      // a reservation record pending or releasing in the pool
  NotAudited,               // no decision published yet (GateSource::Published)
};
// The reason as a CamelCase word ("AwaitingAcknowledgement").
std::string_view toString(GateReason reason);

struct GateState {
  bool open = true;
  // The failure that closed it, kept until acknowledged; empty when the gate is
  // closed only by a transaction in flight or by the operator's pause.
  std::string failureId;
  std::string transaction;  // the in-flight record (pending or releasing) freezing creation
  bool paused = false;      // spec.creationPaused
  std::string reason;
  GateReason why = GateReason::Open;
  bool converging = false;  // closed only while convergent findings are younger than their bound
  bool undecided = false;   // closed because no auditor has published a decision (GateSource::Published)
  // Closed by a failed audit: new grants (add-on increases) are refused too.
  bool failed() const { return !open && !failureId.empty(); }
  friend bool operator==(const GateState&, const GateState&) = default;
};

}  // namespace tally::model
