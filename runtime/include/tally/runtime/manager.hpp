#pragma once
// The manager owns what a process runs, in one order. run() starts, by stage:
//   1. Serving: what answers before anything syncs (the ops listener: probes
//      and /metrics);
//   2. Caches: informers and whatever else must be current before work starts
//      (the state writer and its informers); run() waits until every one is
//      ready(), or fails naming the ones that are not after cacheSyncTimeout;
//   3. Leader: the campaign for the Lease; leader-only controllers and
//      runnables run while this replica leads and stop when it stops leading;
//   4. Replica: controllers and runnables every replica runs once the caches
//      are current (the webhook listener among them).
// When its stop token is requested (SIGTERM: see SignalStop) run() stops them
// in the reverse order: the replica stage (a listener drains its in-flight
// requests), the leader-only work (in-flight reconciles finish) and the Lease
// released, the caches, the serving stage. Within a stage, the last added
// stops first.
//
// Metrics: leader_election_master_status{name} (1 while leading, client-go's
// name), tally_informer_synced{resource}, tally_informer_events_total{resource},
// tally_informer_staleness_seconds{resource}, and each controller's workqueue
// and reconcile families.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/controller.hpp"
#include "tally/runtime/informer.hpp"
#include "tally/runtime/leader_election.hpp"

namespace tally::runtime {

// Something the manager starts and stops. start() returns once the work runs
// (a runnable that must wait for something starts a thread of its own); stop()
// returns once it has ended. ready() is asked of the Caches stage only.
class Runnable {
 public:
  virtual ~Runnable() = default;
  virtual std::string name() const = 0;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual bool ready() const { return true; }
};

enum class Stage { Serving, Caches, Leader, Replica };

// A runnable from functions (ready: none means always ready).
std::unique_ptr<Runnable> runnable(std::string name, std::function<void()> start, std::function<void()> stop,
                                   std::function<bool()> ready = nullptr);

struct ManagerOptions {
  // Without it this replica leads alone (one replica, or leader election off).
  std::optional<LeaderElectionConfig> leaderElection;
  std::chrono::milliseconds cacheSyncTimeout{120'000};
  observability::Registry* metrics = nullptr;
};

class Manager {
 public:
  Manager(std::shared_ptr<Client> client, ManagerOptions options);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // An informer the manager starts, waits for and stops. Add before run().
  template <JsonCodec C>
  Informer<C>& informer(InformerOptions options) {
    auto owned = std::make_unique<OwnedInformer<C>>(client_, std::move(options));
    Informer<C>& ref = owned->informer;
    informers_.push_back(std::move(owned));
    return ref;
  }

  // A controller (see ControllerOptions::leaderOnly). Add before run().
  Controller& controller(ControllerOptions options, Reconciler reconcile);

  // A runnable of `stage`, owned by the manager or not. Add before run().
  void add(Stage stage, std::unique_ptr<Runnable> runnable);
  void add(Stage stage, Runnable& runnable);

  // Blocks until `stop` is requested. An error when the caches did not sync in
  // time (naming the resources) or leader election could not start.
  Status run(std::stop_token stop);

  bool synced() const { return synced_.load(); }
  bool leading() const { return leading_.load(); }
  // Names of informers and Caches-stage runnables not ready yet (for /readyz messages).
  std::vector<std::string> unsynced() const;

 private:
  struct InformerRunnable : Runnable {
    virtual std::chrono::milliseconds staleness() const = 0;
    virtual std::uint64_t events() const = 0;
  };
  template <JsonCodec C>
  struct OwnedInformer final : InformerRunnable {
    OwnedInformer(std::shared_ptr<Client> client, InformerOptions options)
        : resource(options.resource.resource), informer(std::move(client), std::move(options)) {}
    void start() override { informer.start(); }
    void stop() override { informer.stop(); }
    bool ready() const override { return informer.hasSynced(); }
    std::string name() const override { return resource; }
    std::chrono::milliseconds staleness() const override { return informer.staleness(); }
    std::uint64_t events() const override { return informer.stats().events; }
    std::string resource;
    Informer<C> informer;
  };

  void startLeaderControllers();
  void stopLeaderControllers();
  void registerMetrics();
  Status waitForCaches(std::stop_token stop);
  void stopStage(Stage stage);
  std::vector<Runnable*> stage(Stage stage) const;

  std::shared_ptr<Client> client_;
  ManagerOptions options_;
  std::vector<std::unique_ptr<InformerRunnable>> informers_;
  std::vector<std::unique_ptr<Runnable>> owned_;
  std::vector<std::pair<Stage, Runnable*>> runnables_;  // in the order added
  std::vector<Runnable*> started_;                      // non-leader runnables running, in start order
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::unique_ptr<LeaderElector> elector_;
  std::mutex leaderMu_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> leading_{false};
  observability::Gauge* leaderGauge_ = nullptr;
  struct ScrapeState {
    struct Series {
      InformerRunnable* informer;
      observability::Gauge* synced;
      observability::Counter* events;
      observability::Gauge* stale;
      std::uint64_t counted;
    };
    std::mutex mu;
    bool alive = true;
    std::vector<Series> series;
  };
  std::shared_ptr<ScrapeState> scrape_;
};

// Requests a stop when the process receives SIGTERM or SIGINT. Construct it in
// main() before any other thread starts: it blocks both signals in the calling
// thread (threads started later inherit the mask) and waits for them on a
// thread of its own.
class SignalStop {
 public:
  SignalStop();
  ~SignalStop();
  SignalStop(const SignalStop&) = delete;
  SignalStop& operator=(const SignalStop&) = delete;

  std::stop_token token() const { return source_.get_token(); }
  // Blocks until the stop is requested.
  void wait() const;
  // The signal that requested the stop (0 while none has).
  int received() const { return received_.load(); }

 private:
  std::stop_source source_;
  std::atomic<int> received_{0};
  std::jthread waiter_;
};

}  // namespace tally::runtime
