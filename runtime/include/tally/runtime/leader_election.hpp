#pragma once
// Leader election on a coordination.k8s.io/v1 Lease with client-go's
// semantics: a candidate takes the lease when it is free or when its record
// has not changed for leaseDuration as observed on the candidate's own clock
// (no cross-machine clock comparison); the leader renews every retryPeriod
// and gives up when it could not renew for renewDeadline; on stop it
// releases the lease so a successor need not wait for expiry.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "tally/runtime/client.hpp"
#include "tally/runtime/lease.hpp"

namespace tally::runtime {

struct LeaderElectionConfig {
  std::string leaseNamespace;
  std::string leaseName;
  std::string identity;
  std::chrono::milliseconds leaseDuration{15'000};
  std::chrono::milliseconds renewDeadline{10'000};
  std::chrono::milliseconds retryPeriod{2'000};
  bool releaseOnStop = true;
  // Runs on its own thread while leading; stop is requested when leadership ends.
  std::function<void(std::stop_token)> onStartedLeading;
  std::function<void()> onStoppedLeading;
  std::function<void(const std::string& identity)> onNewLeader;
};

class LeaderElector {
 public:
  LeaderElector(std::shared_ptr<Client> client, LeaderElectionConfig cfg);
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  void start();
  // Stops campaigning; a leader stops its work and releases the lease.
  void stop();
  bool isLeader() const { return leading_.load(); }
  std::string observedLeader() const;
  uint64_t transitions() const { return transitions_.load(); }

  // One acquire-or-renew attempt; public for tests.
  Result<bool> tryAcquireOrRenew();

 private:
  void run(std::stop_token st);
  bool sleepFor(std::stop_token& st, std::chrono::milliseconds d);
  Status release();
  std::string leaseBody(const std::string& holder, int32_t durationSeconds, const std::string& acquireTime,
                        int32_t transitions, const std::string& now) const;

  std::shared_ptr<Client> client_;
  LeaderElectionConfig cfg_;
  Resource resource_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::string observedHolder_;
  std::string observedRv_;
  std::string observedAcquireTime_;
  int32_t observedTransitions_ = 0;
  std::chrono::steady_clock::time_point observedAt_{};
  std::atomic<bool> leading_{false};
  std::atomic<uint64_t> transitions_{0};
  std::jthread thread_;
};

}  // namespace tally::runtime
