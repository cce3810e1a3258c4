#pragma once
// The manager owns a process's informers and controllers: it starts the
// informers, waits until every cache has synced, starts the controllers that
// every replica runs, and campaigns for the leader Lease; leader-only
// controllers run while this replica leads and stop when it stops leading.
// run() returns when its stop token is requested (SIGTERM: see SignalStop),
// after stopping the controllers (in-flight reconciles finish), releasing the
// Lease and stopping the informers, in that order.
//
// Metrics: leader_election_master_status{name} (1 while leading, client-go's
// name), tally_informer_synced{resource}, tally_informer_events_total{resource},
// tally_informer_staleness_seconds{resource}, and each controller's workqueue
// and reconcile families.

#include <atomic>
#include <chrono>
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

  // Blocks until `stop` is requested. An error when the caches did not sync in
  // time (naming the resources) or leader election could not start.
  Status run(std::stop_token stop);

  bool synced() const { return synced_.load(); }
  bool leading() const { return leading_.load(); }
  // Names of informers not synced yet (for /readyz messages).
  std::vector<std::string> unsynced() const;

 private:
  struct Runnable {
    virtual ~Runnable() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    virtual bool hasSynced() const = 0;
    virtual std::string name() const = 0;
    virtual std::chrono::milliseconds staleness() const = 0;
    virtual std::uint64_t events() const = 0;
  };
  template <JsonCodec C>
  struct OwnedInformer final : Runnable {
    OwnedInformer(std::shared_ptr<Client> client, InformerOptions options)
        : resource(options.resource.resource), informer(std::move(client), std::move(options)) {}
    void start() override { informer.start(); }
    void stop() override { informer.stop(); }
    bool hasSynced() const override { return informer.hasSynced(); }
    std::string name() const override { return resource; }
    std::chrono::milliseconds staleness() const override { return informer.staleness(); }
    std::uint64_t events() const override { return informer.stats().events; }
    std::string resource;
    Informer<C> informer;
  };

  void startLeaderControllers();
  void stopLeaderControllers();
  void registerMetrics();

  std::shared_ptr<Client> client_;
  ManagerOptions options_;
  std::vector<std::unique_ptr<Runnable>> informers_;
  std::vector<std::unique_ptr<Controller>> controllers_;
  std::unique_ptr<LeaderElector> elector_;
  std::mutex leaderMu_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> leading_{false};
  observability::Gauge* leaderGauge_ = nullptr;
  struct ScrapeState {
    struct Series {
      Runnable* informer;
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
