#pragma once
// The one writer of the cluster state. Watch events and cache-sync marks are
// queued by any thread, decoded already (each event is decoded once, by its
// informer); the writer thread applies them to the model's incremental index
// and publishes a Snapshot at most every `publishInterval` while something
// changed, and at once after an urgent task. A binary hears of changes there
// with an Observer, adds its own state to the same thread and the same
// publication with an Extension (extension.hpp), and runs its own writes on
// that thread with post(): the extender's assumed placements and bound-pod
// rows are one.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "tally/common/snapshot_cell.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/index.hpp"
#include "tally/state/extension.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::state {

struct PublishStats {
  std::uint64_t publishes = 0;
  std::uint64_t eventsApplied = 0;
  std::chrono::nanoseconds lastPublish{0};  // cost of building the last snapshot
  std::chrono::nanoseconds lastApply{0};    // cost of applying the last batch
  bool lastCopiedCluster = false;           // the last publish copied the cluster (a non-pod object changed)
  std::uint64_t clusterCopies = 0;          // publishes that copied the cluster
  std::size_t lastFitBlocksShared = 0;      // FitTable blocks shared with the previous snapshot
  std::uint64_t skippedUnchanged = 0;       // upserts equal to what the cache held (e.g. node heartbeats)
  std::uint64_t writerWakeups = 0;          // times the writer thread woke up (signalled, timed out or spurious)
};

class Writer {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::chrono::milliseconds publishInterval{5};
    // Kinds that have a source: a snapshot is ready once every one synced.
    // Kinds not listed count as synced and empty.
    std::set<model::Kind> watched;
    std::function<model::Timestamp()> clock;  // seconds; default: system clock
    // Not owned; they outlive the writer. Each extension publishes a part of
    // its own type (two of one type: std::invalid_argument).
    std::vector<Observer*> observers;
    std::vector<AnyExtension*> extensions;
    // Where each snapshot's classes take the gate the doors apply from
    // (model::doorGates): the auditor's published decision, or, where no
    // auditor runs, the gate function evaluated here on every copy of the
    // cluster and at least every `gateEvaluationInterval` (caches age, pods
    // over-commit nodes) with `gateAudit` (staleAfterSeconds; no history).
    model::GateSource gates = model::GateSource::Published;
    model::AuditOptions gateAudit;
    std::chrono::milliseconds gateEvaluationInterval{1'000};
    // Whose GPU use the doors and the audit attribute (carried in every
    // snapshot's cluster: model::Cluster::tenancy).
    model::TenancyPolicy tenancy;
  };
  // A write of a binary's own, run on the writer thread in queue order.
  using Task = std::function<void(model::UsageIndex& index)>;

  explicit Writer(Options options);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Producer side (any thread).
  void upsert(Object object);
  void remove(model::Kind kind, std::string ns, std::string name);
  void setSynced(model::Kind kind, bool synced);
  // `urgent`: publish as soon as it ran rather than at the next interval.
  void post(Task task, bool urgent);
  // A task that changes what the cluster holds besides pods and the kinds the
  // writer applies itself (the alerts): the next snapshot, published at once,
  // copies the cluster so readers see it.
  void postObjectsChange(Task task);

  // Runs the writer on its own thread; without it, callers drive flush().
  void start();
  void stop();
  // Applies everything queued and publishes now (tests, benches, offline mode).
  void flush();

  const SnapshotCell<Snapshot>& snapshots() const { return cell_; }
  PublishStats stats() const;
  std::size_t queued() const;

 private:
  struct Remove {
    model::Kind kind;
    std::string ns, name;
  };
  struct Synced {
    model::Kind kind;
    bool synced;
  };
  using Event = std::variant<Object, Remove, Synced, Task>;
  static constexpr std::size_t kRetainedBatch = 4096;  // events the writer keeps room for between batches
  static constexpr std::uint64_t kReleaseAfterEvents = 100'000;

  void enqueue(Event event, bool urgent);
  void run(std::stop_token stop);
  void applyBatch(std::vector<Event>& batch);
  void apply(Object& object);
  void apply(Remove& remove);
  void apply(Synced& synced);
  void apply(Task& task);
  void podChanged(const std::string& key, const model::Pod* pod);
  void tick(Clock::time_point now);
  Clock::time_point nextDeadline() const;
  void publish();
  void releaseFreeMemoryIfDue(const Snapshot& snapshot);

  Options options_;
  SnapshotCell<Snapshot> cell_;

  mutable std::mutex queueMu_;
  std::condition_variable_any queueCv_;
  std::vector<Event> queue_;
  bool urgent_ = false;
  // Set by the writer before it waits: whether any event wakes it (nothing
  // waits to be published) or only an urgent one (it sleeps until the next
  // publication is due and takes what queued meanwhile). Enqueuers signal only
  // what it waits for: a watch delivering thousands of events a second would
  // otherwise wake it for each, to find it has nothing to do yet.
  bool wakeOnAny_ = true;
  std::uint64_t writerWakeups_ = 0;

  // Writer-only state.
  model::UsageIndex index_;
  std::set<model::Kind> synced_;
  // The cluster part of the last snapshot, and whether an object other than a
  // pod changed since (a new one is copied then).
  std::shared_ptr<const model::Cluster> base_;
  bool baseDirty_ = true;
  const Snapshot* published_ = nullptr;  // alive until the next publish retires it
  bool released_ = false;                // free memory was returned once every kind had synced
  std::uint64_t appliedSinceRelease_ = 0;
  bool dirty_ = true;
  std::uint64_t generation_ = 0;
  Clock::time_point lastPublish_{};
  Clock::time_point nextGateEvaluation_{};  // GateSource::Evaluated only
  std::mutex writerMu_;                     // flush() and the thread never apply at once

  mutable std::mutex statsMu_;
  PublishStats stats_;
  std::jthread thread_;
};

// Queues every object of `cluster` (an offline snapshot file) as upserts, the
// kinds in registry order; its ledger and alerts are not read.
void upsertCluster(Writer& writer, const model::Cluster& cluster);

}  // namespace tally::state
