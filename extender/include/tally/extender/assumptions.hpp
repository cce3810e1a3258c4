#pragma once
// What the extender adds to the cluster state (tally/state/): placements it
// assumed for binds in flight, and the bound GPU pods by node that preemption
// reads. Both live on the state writer's thread as one Extension (whose part
// is the rows) that observes the pods, and are published in the same
// snapshot; CacheWriter is that writer with them.
//
// Binds are serialised on the writer thread: each assumption is checked by
// the model against the live index, which already holds every earlier one,
// so two binds can never take the same units.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tally/extender/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::extender {

// Why an assumption could not be recorded.
// NoLongerFits: since the scheduler's filter call, other placements took the
// units; the model refuses the node now, so the bind must not go ahead.
enum class AssumeOutcome { Recorded, PodUnknown, NoLongerFits, NotPublished };

class Assumptions final : public state::Observer, public state::Extension<BoundPodRows> {
 public:
  // `podWait`: how long a bind for a pod the watch has not delivered yet
  // waits for it (0: refused at once, PodUnknown).
  explicit Assumptions(std::chrono::milliseconds ttl, std::chrono::milliseconds podWait = {})
      : ttl_(ttl), podWait_(podWait) {}

  struct Assume {
    std::string ns, name, uid, node;
    std::shared_ptr<std::promise<AssumeOutcome>> done;
  };
  // Writer thread (state::Writer::post).
  void assume(model::UsageIndex& index, Assume& assume);
  void forget(model::UsageIndex& index, const std::string& uid);

  // Any thread.
  std::uint64_t expired() const { return expired_.load(std::memory_order_relaxed); }
  std::size_t lastRowsRebuilt() const { return lastRowsRebuilt_.load(std::memory_order_relaxed); }
  // Binds that waited for their pod's event: it arrived in time, or not.
  std::uint64_t podWaitsStarted() const { return podWaitsStarted_.load(std::memory_order_relaxed); }
  std::uint64_t podArrivals() const { return podArrivals_.load(std::memory_order_relaxed); }
  std::uint64_t podWaitsTimedOut() const { return podWaitsTimedOut_.load(std::memory_order_relaxed); }

  // state::Observer (writer thread).
  void podChanged(const std::string& key, const model::Pod* pod) override;
  void published(const state::Snapshot& snapshot) override;
  void stopped() override;
  // state::Extension (writer thread).
  bool tick(model::UsageIndex& index, Clock::time_point now) override;
  Clock::time_point nextDeadline() const override;
  std::shared_ptr<const BoundPodRows> publish(const model::Cluster& live) override;

 private:
  // `pod`: the pod as it now is, bound to its node; null when it is bound to none.
  void trackPod(const std::string& key, std::shared_ptr<const model::Pod> pod);

  // Records the assumption, or answers why not; `arrived`: the pod's event
  // has just been applied (no further wait for it).
  void decide(model::UsageIndex& index, Assume& assume, bool arrived);

  std::chrono::milliseconds ttl_;
  std::chrono::milliseconds podWait_;
  // Binds for pods the watch had not delivered, by pod key, each with the
  // time it gives up (PodUnknown); moved to arrived_ by the pod's event and
  // decided at the writer's next tick, in the same pass that applied it.
  struct AwaitingPod {
    Assume assume;
    Clock::time_point until;
  };
  std::unordered_map<std::string, std::vector<AwaitingPod>> awaitingPod_;
  std::vector<Assume> arrived_;
  std::atomic<std::uint64_t> podWaitsStarted_{0}, podArrivals_{0}, podWaitsTimedOut_{0};
  std::unordered_map<std::string, std::string> nodeOfPod_;  // pod key -> node
  // node -> its bound pods by key, each copied once per change of the pod
  std::unordered_map<std::string, std::unordered_map<std::string, std::shared_ptr<const model::Pod>>> podsOfNode_;
  std::unordered_set<std::string> dirtyRows_;
  BoundPodRows rows_;
  // Each assumption's deadline by pod uid, and the same deadlines in the order
  // they fall (one TTL for all: the order they were set in). Entries of
  // assumptions forgotten or made again stay in the queue until they come up
  // and are skipped then, so expiry costs what expires, not what is assumed.
  std::unordered_map<std::string, Clock::time_point> deadline_;
  std::deque<std::pair<Clock::time_point, std::string>> deadlineQueue_;
  std::vector<std::shared_ptr<std::promise<AssumeOutcome>>> waitingForPublish_;
  // The last published cluster (door gates applied): bind decides as the filter did.
  std::shared_ptr<const model::Cluster> gated_;
  std::atomic<std::uint64_t> expired_{0};
  std::atomic<std::size_t> lastRowsRebuilt_{0};
};

struct PublishStats : state::PublishStats {
  std::size_t lastRowsRebuilt = 0;  // bound-pod rows rebuilt
  std::uint64_t assumptionsExpired = 0;
  std::uint64_t bindPodWaitsStarted = 0;   // binds that began waiting for their pod
  std::uint64_t bindPodArrivals = 0;       // binds that waited for their pod and found it
  std::uint64_t bindPodWaitsTimedOut = 0;  // binds that waited for their pod in vain
};

namespace detail {
struct AssumptionsMember {
  Assumptions assumptions;
};
}  // namespace detail

// The state writer with the extender's assumptions and rows.
class CacheWriter : private detail::AssumptionsMember, public state::Writer {
 public:
  struct Options {
    std::chrono::milliseconds publishInterval{5};
    std::chrono::milliseconds assumeTtl{30'000};
    // A bind for a pod the pod watch has not delivered yet waits this long
    // for its event (kube-scheduler's own watch can be ahead of this one)
    // before it is refused PodUnknown.
    std::chrono::milliseconds bindPodWait{500};
    // Kinds that have a source: a snapshot is ready once every one synced.
    std::set<model::Kind> watched;
    std::function<model::Timestamp()> clock;                 // seconds; default: system clock
    model::GateSource gates = model::GateSource::Published;  // see state::Writer::Options
    model::AuditOptions gateAudit;
    std::chrono::milliseconds gateEvaluationInterval{1'000};  // see state::Writer::Options
    model::TenancyPolicy tenancy;                             // see state::Writer::Options
  };
  explicit CacheWriter(Options options);

  // Records pod ns/name (matching uid when given) as placed on `node` until
  // the watch sees it bound, forget() is called, or the TTL passes. The future
  // is ready once a snapshot holding the assumption is published.
  std::future<AssumeOutcome> assume(std::string ns, std::string name, std::string uid, std::string node);
  void forget(std::string uid);

  PublishStats stats() const;
};

}  // namespace tally::extender
