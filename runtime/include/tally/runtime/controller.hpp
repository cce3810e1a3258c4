#pragma once
// A controller: event handlers turn objects into keys, keys go through a
// rate-limited work queue, N workers call reconcile(key). Level-based: an
// event only says which key to look at; reconcile reads the current state and
// converges, so a dropped, duplicated or reordered event changes nothing.
//
// reconcile returns done (forget the key's backoff), requeue (again, with
// per-key exponential backoff), requeueAfter(d) (again after d), terminal(why)
// (an error retrying cannot mend: logged, counted, not requeued; the key's next
// event brings it back), or an error (logged, counted, requeued with backoff). A key is never reconciled by two
// workers at once.
//
// Metrics carry client-go's workqueue names (workqueue_adds_total,
// workqueue_depth, workqueue_queue_duration_seconds,
// workqueue_work_duration_seconds, workqueue_retries_total,
// workqueue_unfinished_work_seconds, workqueue_longest_running_processor_seconds,
// label `name`) and controller-runtime's reconcile names
// (controller_runtime_reconcile_total{controller,result},
// controller_runtime_reconcile_errors_total{controller}).

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/informer.hpp"
#include "tally/runtime/rate_limiter.hpp"
#include "tally/runtime/result.hpp"
#include "tally/runtime/work_queue.hpp"

namespace tally::runtime {

struct ReconcileResult {
  enum class Action { kDone, kRequeue, kRequeueAfter, kTerminal };
  Action action = Action::kDone;
  std::chrono::milliseconds after{0};
  std::string why;  // kTerminal: what cannot be mended by retrying

  static ReconcileResult done() { return {}; }
  static ReconcileResult requeue() { return {Action::kRequeue, {}, {}}; }
  static ReconcileResult requeueAfter(std::chrono::milliseconds d) { return {Action::kRequeueAfter, d, {}}; }
  static ReconcileResult terminal(std::string why) { return {Action::kTerminal, {}, std::move(why)}; }
};

// reconcile(key, stop): `key` is "namespace/name" (or "name" for cluster-scoped
// objects); `stop` is requested when the controller stops (a long reconcile
// should return early).
using Reconciler = std::function<Result<ReconcileResult>(const std::string& key, std::stop_token stop)>;

struct ControllerOptions {
  std::string name;
  int workers = 1;
  RateLimiterConfig rateLimits;
  // Runs only on the replica holding the leader Lease (see Manager).
  bool leaderOnly = true;
  // Called by every start() before the workers run (a new leadership term):
  // a controller forgets what it kept from an earlier term and enqueues its
  // keys here, so no reconcile of the new term sees the old state.
  std::function<void()> onStart;
};

struct ControllerStats {
  std::uint64_t reconciles = 0;
  std::uint64_t errors = 0;
  std::uint64_t requeues = 0;
};

class Controller {
 public:
  Controller(ControllerOptions options, Reconciler reconcile, observability::Registry* metrics = nullptr);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  const std::string& name() const { return options_.name; }
  bool leaderOnly() const { return options_.leaderOnly; }

  void enqueue(const std::string& key);
  void enqueueAfter(const std::string& key, std::chrono::milliseconds delay);

  // Every add, update and delete of the informer's objects enqueues the keys
  // `keysOf` names (the object's own key, C::key, by default). Register before
  // the informer starts.
  template <JsonCodec C>
  void watch(Informer<C>& informer,
             std::function<std::vector<std::string>(const typename C::Object&)> keysOf = nullptr) {
    auto keys = std::make_shared<std::function<std::vector<std::string>(const typename C::Object&)>>(
        keysOf ? std::move(keysOf)
               : [](const typename C::Object& o) { return std::vector<std::string>{std::string(C::key(o))}; });
    auto push = [this, keys](const typename C::Object& o) {
      for (const auto& k : (*keys)(o)) enqueue(k);
    };
    informer.addHandlers({push,
                          [push](const typename C::Object& before, const typename C::Object& after) {
                            push(before);
                            push(after);
                          },
                          push});
    // A new term (start after stop, e.g. a new leadership) begins with every
    // object the cache holds: keys queued in an earlier term are not trusted.
    seeders_.push_back([this, keys, &informer] {
      informer.snapshot()->forEach([&](std::string_view, const typename C::Object& o) {
        for (const auto& k : (*keys)(o)) enqueue(k);
      });
    });
  }

  // Enqueues `key` at every start(), whether or not an informer holds an
  // object for it: a leader-only controller whose work begins before its
  // object exists (a Secret it creates) is kicked in every leadership term.
  void enqueueOnStart(std::string key);

  // Starts the workers and enqueues every object the watched informers hold;
  // stop() lets in-flight reconciles finish, then joins the workers. A stopped
  // controller can be started again (a new leadership term).
  void start();
  void stop();
  bool running() const { return running_.load(); }

  ControllerStats stats() const;
  std::size_t queueLength() const;

 private:
  struct Metrics;
  void work(WorkQueue<std::string>& queue, std::stop_token stop);
  void reconcileOne(WorkQueue<std::string>& queue, const std::string& key, std::stop_token stop);

  ControllerOptions options_;
  Reconciler reconcile_;
  std::shared_ptr<Metrics> metrics_;  // references into the registry; a scrape keeps its copy
  std::shared_ptr<WorkQueue<std::string>> queue() const;

  // What the work loop and a metrics scrape share; the scrape holds it weakly,
  // so a registry that outlives the controller never reads a dead one.
  struct Shared {
    mutable std::mutex mu;
    std::shared_ptr<WorkQueue<std::string>> queue;  // replaced by start() after a stop()
    std::unordered_map<std::string, std::chrono::steady_clock::time_point> queuedSince;
    std::unordered_map<std::string, std::chrono::steady_clock::time_point> workingSince;
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::vector<std::function<void()>> seeders_;
  std::vector<std::jthread> workers_;
  std::atomic<bool> running_{false};
  std::mutex lifecycle_;

  std::atomic<std::uint64_t> reconciles_{0}, errors_{0}, requeues_{0};
};

}  // namespace tally::runtime
