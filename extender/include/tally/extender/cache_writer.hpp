#pragma once
// The one writer of the extender's state. Watch events, cache-sync marks and
// assumed placements are queued by any thread; the writer thread applies them
// to the model's incremental index and publishes an ExtenderSnapshot at most
// every `publishInterval` while something changed, and at once when a caller
// waits for its change (an assumed placement) to be visible.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "tally/extender/snapshot.hpp"
#include "tally/extender/snapshot_cell.hpp"
#include "tally/model/index.hpp"

namespace tally::extender {

using WatchedObject =
    std::variant<model::Node, model::Pod, model::Namespace, model::HierarchicalResourceQuota, model::ResourceQuota,
                 model::DeviceClass, model::GpuDevice, model::VirtualMachineInstance, model::Organization,
                 std::optional<model::BillingPlans>, std::vector<model::PermittedHostDevice>, model::Ledger>;

model::Kind kindOf(const WatchedObject& object);

struct PublishStats {
  std::uint64_t publishes = 0;
  std::uint64_t eventsApplied = 0;
  std::chrono::nanoseconds lastPublish{0};  // cost of building the last snapshot
  std::chrono::nanoseconds lastApply{0};    // cost of applying the last batch
  std::size_t lastRowsRebuilt = 0;          // bound-pod rows rebuilt
  bool lastCopiedCluster = false;           // the last publish copied the cluster (a non-pod object changed)
  std::uint64_t clusterCopies = 0;          // publishes that copied the cluster
  std::size_t lastFitBlocksShared = 0;      // FitTable blocks shared with the previous snapshot
  std::uint64_t skippedUnchanged = 0;       // upserts equal to what the cache held (e.g. node heartbeats)
  std::uint64_t assumptionsExpired = 0;
  std::uint64_t writerWakeups = 0;  // times the writer thread woke up (signalled, timed out or spurious)
};

// Why an assumption could not be recorded.
// NoLongerFits: since the scheduler's filter call, other placements took the
// units; the model refuses the node now, so the bind must not go ahead.
enum class AssumeOutcome { Recorded, PodUnknown, NoLongerFits, NotPublished };

class CacheWriter {
 public:
  struct Options {
    std::chrono::milliseconds publishInterval{5};
    std::chrono::milliseconds assumeTtl{30'000};
    // Kinds that have a watch: a snapshot is ready once every one synced.
    // Kinds not listed count as synced and empty.
    std::set<model::Kind> watched;
    std::function<model::Timestamp()> clock;  // seconds; default: system clock
  };

  explicit CacheWriter(Options options);
  ~CacheWriter();
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  // Producer side (any thread).
  void upsert(WatchedObject object);
  void remove(model::Kind kind, std::string ns, std::string name);
  void setSynced(model::Kind kind, bool synced);
  // Records pod ns/name (matching uid when given) as placed on `node` until
  // the watch sees it bound, forget() is called, or the TTL passes. The future
  // is ready once a snapshot holding the assumption is published.
  std::future<AssumeOutcome> assume(std::string ns, std::string name, std::string uid, std::string node);
  void forget(std::string uid);

  // Runs the writer on its own thread; without it, callers drive flush().
  void start();
  void stop();
  // Applies everything queued and publishes now (tests, benches, offline mode).
  void flush();

  const SnapshotCell<ExtenderSnapshot>& snapshots() const { return cell_; }
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
  struct Assume {
    std::string ns, name, uid, node;
    std::shared_ptr<std::promise<AssumeOutcome>> done;
  };
  struct Forget {
    std::string uid;
  };
  using Event = std::variant<WatchedObject, Remove, Synced, Assume, Forget>;

  void enqueue(Event event, bool urgent);
  void run(std::stop_token stop);
  void applyBatch(std::vector<Event>& batch);
  void apply(WatchedObject& object);
  void apply(Remove& remove);
  void apply(Synced& synced);
  void apply(Assume& assume);
  void apply(Forget& forget);
  void trackPod(const std::string& key, const std::string& node);
  void expireAssumptions(std::chrono::steady_clock::time_point now);
  void publish();

  Options options_;
  SnapshotCell<ExtenderSnapshot> cell_;

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
  std::unordered_map<std::string, std::string> nodeOfPod_;                       // pod key -> node
  std::unordered_map<std::string, std::unordered_set<std::string>> podsOfNode_;  // node -> pod keys
  std::unordered_set<std::string> dirtyRows_;
  model::CowMap<std::shared_ptr<const BoundPods>> rows_;
  // The cluster part of the last snapshot, and whether an object other than a
  // pod changed since (a new one is copied then).
  std::shared_ptr<const model::Cluster> base_;
  bool baseDirty_ = true;
  const ExtenderSnapshot* published_ = nullptr;  // alive until the next publish retires it
  // Each assumption's deadline by pod uid, and the same deadlines in the order
  // they fall (one TTL for all: the order they were set in). Entries of
  // assumptions forgotten or made again stay in the queue until they come up
  // and are skipped then, so expiry costs what expires, not what is assumed.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> assumeDeadline_;
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>> deadlineQueue_;
  std::vector<std::shared_ptr<std::promise<AssumeOutcome>>> waitingForPublish_;
  bool dirty_ = true;
  std::uint64_t generation_ = 0;
  std::chrono::steady_clock::time_point lastPublish_{};
  std::mutex writerMu_;  // flush() and the thread never apply at once

  mutable std::mutex statsMu_;
  PublishStats stats_;
  std::jthread thread_;
};

}  // namespace tally::extender
