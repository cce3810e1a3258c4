#pragma once
// The pool auditor (SPEC 3.4, 3.5; leader only): after every change that can
// move a term of a pool's capacity invariant (debounced, --audit-debounce) and
// once a period (--audit-interval), audits each GPUDeviceClass on this
// replica's snapshot with the model (evaluateInvariant, auditPool,
// evaluateGate) and publishes the result as the class's status: the pool's
// dashboard (every term of the invariant, headroom, the in-flight transaction),
// the findings, the InvariantHolds and CreationOpen conditions and the failure
// id the doors and the acknowledgements read.
//
// The gate is decided on the class as the API server has it now (read before
// each write: its published failure id and its acknowledgements), and the
// status is written only when something but lastAuditTime changed, or when the
// period's audit is due, so a quiet cluster is not rewritten on every event. A
// condition whose status did not change keeps its lastTransitionTime.
//
// Each change of the gate is an Event on the class (Normal CreationOpened,
// Warning CreationClosed), so is each change of the invariant (Normal
// InvariantHolds, Warning InvariantBroken), and a reservation record stuck in
// `releasing` longer than --release-stuck-after (Warning ReleaseStuck). Metrics:
// tally_controller_pool_units{pool,term}, _pool_headroom{pool},
// _pool_gate_open{pool}, _audit_findings{pool,code}, _audit_seconds,
// _audits_total, _release_stuck{pool,record}.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "tally/codec/pool_status.hpp"
#include "tally/common/condition.hpp"
#include "tally/controller/leader_controller.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/index.hpp"
#include "tally/model/pool.hpp"
#include "tally/observability/metrics.hpp"

namespace tally::controller {

inline constexpr std::string_view kInvariantCondition = "InvariantHolds";
inline constexpr std::string_view kCreationOpenCondition = "CreationOpen";
inline constexpr std::string_view kAuditFieldManager = "tally-controller";
// At most this many findings are published (the CRD's maxItems).
inline constexpr std::size_t kMaxPublishedFindings = 256;

// One pool's audit: what the model says about it.
struct PoolAudit {
  model::PoolInvariant invariant;
  std::vector<model::Finding> findings;
  model::GateState gate;
};
PoolAudit auditOf(const model::Cluster& cluster, const model::DeviceClass& pool,
                  const model::AuditOptions& options = {});

// The status of a GPUDeviceClass as the auditor writes and reads it.
using codec::PoolStatus;

// The status the audit makes, at `now` (RFC 3339); conditions whose status is
// the one in `current` keep its lastTransitionTime.
PoolStatus desiredStatus(const PoolAudit& audit, const model::DeviceClass& pool, const PoolStatus* current,
                         std::string_view now);

// The CreationOpen reason of a gate: Open, AuditFailed, AwaitingAcknowledgement,
// Converging, Paused or TransactionInFlight.
std::string gateReason(const model::GateState& gate);

// The status's wire (codec/pool_status.hpp): the merge patch that publishes
// it, and the status read back from a GPUDeviceClass object.
using codec::decodePoolStatus;
using codec::statusPatch;

struct PoolEvent {
  std::string type, reason, message;
  friend bool operator==(const PoolEvent&, const PoolEvent&) = default;
};
// The Events a change of the published status makes: the gate's (status or
// reason changed) and the invariant's (status changed).
std::vector<PoolEvent> statusEvents(const std::string& pool, const PoolStatus* before, const PoolStatus& after);

struct PoolAuditorOptions {
  std::string component = "tally-controller";  // Events' reportingComponent
  std::string instance;                        // Events' reportingInstance
  // Changes within this long are audited once.
  std::chrono::milliseconds debounce{1'000};
  // The status is rewritten at least this often (lastAuditTime moves).
  std::chrono::seconds interval{24 * 3600};
  std::chrono::seconds releaseStuckAfter{24 * 3600};
  model::AuditOptions audit;
  observability::Registry* metrics = nullptr;
  // Unix seconds; default: the system clock.
  std::function<std::int64_t()> clock;
};

// The leader-only controller "pool-auditor" (leader_controller.hpp).
class PoolAuditor final : public LeaderController {
 public:
  PoolAuditor(std::shared_ptr<runtime::Client> client, PoolAuditorOptions options);
  ~PoolAuditor() override;

  // One pool, by class name.
  runtime::Result<runtime::ReconcileResult> reconcile(const std::string& key, std::stop_token stop) override;

  // Audit every pool again after the next publication (writer thread: the
  // alert source's task calls it after it changed the alerts).
  void wakeAll() { wake_ = true; }

  // state::Observer
  void podChanged(const std::string& key, const model::Pod* pod) override;
  void objectChanged(model::Kind kind, const std::string& key) override;
  // After a change: the over-committed nodes on the writer's live index,
  // whose cluster holds the pods a snapshot keeps only as sums.
  void applied(const model::UsageIndex& index) override;
  void published(const state::Snapshot& snapshot) override;

 private:
  struct Metrics;
  struct Pool {
    std::optional<PoolStatus> written;  // what this term last wrote or read
    std::chrono::steady_clock::time_point writtenAt{};
    std::map<std::string, model::Timestamp> releasingSince;
    std::set<std::string> stuckReported;
    std::set<std::string> findingCodes;  // codes whose gauge is set
    // When this term first saw each current finding (model::findingKey).
    std::map<std::string, model::Timestamp> findingsSince;
  };

  std::int64_t now() const;
  void startTerm() override;
  void event(const std::string& pool, const std::string& uid, const PoolEvent& e);
  void record(const std::string& pool, const PoolAudit& audit, Pool& state, double seconds);
  // Names the pods of each NodeOvercommitted finding, as the last tick found them.
  void nameHolders(PoolAudit& audit) const;
  void forget(const std::string& pool);
  void reportStuck(const std::string& pool, Pool& state, const model::Cluster& cluster, std::int64_t unixNow);
  PoolAudit audit(const state::Snapshot& snap, const model::DeviceClass& pool, Pool& state, std::int64_t unixNow);
  runtime::ReconcileResult nextAudit(const model::Cluster& cluster, const PoolAudit& audit, const Pool& state,
                                     std::int64_t unixNow) const;
  runtime::Result<runtime::ReconcileResult> auditAndWrite(const state::Snapshot& snap, const std::string& pool,
                                                          Pool& state, std::int64_t unixNow, bool periodDue);

  PoolAuditorOptions options_;
  std::unique_ptr<Metrics> metrics_;
  // The worker's.
  std::map<std::string, Pool> pools_;
  bool sawReady_ = false;
  // Pools a change has scheduled an audit of that has not started yet: the
  // writer schedules one per pool until the worker starts it (and reads the
  // snapshot), so churn coalesces into one audit per debounce instead of an
  // audit per publication, run back to back.
  std::mutex scheduledMu_;
  std::set<std::string> scheduled_;
  // The writer thread's.
  bool wake_ = true;
  bool everReady_ = false;
  // Which nodes' over-commits to look at again after the batch: the nodes a
  // pod, claim or device left or came to (their keys' last node remembered
  // here), or every node after any other kind changed (a node, a class, a
  // slice: what a node serves).
  bool allNodesDirty_ = true;
  std::set<std::string> dirtyNodes_;
  std::vector<std::pair<model::Kind, std::string>> movedHolders_;  // claims and devices, resolved in applied()
  std::unordered_map<std::string, std::string> podNode_, claimNode_, deviceNode_;
  std::map<std::string, model::NodeOvercommit> overcommitted_;
  void moved(std::unordered_map<std::string, std::string>& nodes, const std::string& key, const std::string& node);
  // Written by the writer thread at each tick after a change, read by the
  // worker: a batch ahead of the snapshot at most (it only names holders).
  std::atomic<std::shared_ptr<const std::map<std::string, model::NodeOvercommit>>> overcommits_;
};

}  // namespace tally::controller
