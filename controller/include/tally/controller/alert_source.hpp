#pragma once
// The Alertmanager source (SPEC 3.5, optional: --alertmanager-url): every
// --alertmanager-interval it reads Alertmanager's v2 API
// (GET /api/v2/alerts?active=true&silenced=false&inhibited=false) and hands the
// firing alerts that name a pool in their --alertmanager-pool-label label
// (default gpu_pool) to the state writer as model::Cluster::alerts; alerts
// without that label name no pool and are ignored. The audit turns each into
// an ActiveAlert finding of its pool, which closes the pool's gate.
//
// Fail closed: when Alertmanager cannot be reached, answers other than 200, or
// answers what cannot be read, the alerts become one alert named
// `alertmanager-unreachable` that applies to every pool, so stale alert data
// never keeps a gate open. Metrics: tally_controller_alertmanager_polls_total
// {result}, tally_controller_alertmanager_alerts (pool alerts last read).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tally/codec/alertmanager_alerts.hpp"
#include "tally/common/expected.hpp"
#include "tally/model/objects.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

inline constexpr std::string_view kAlertmanagerUnreachable = "alertmanager-unreachable";

// The alerts of a v2 /api/v2/alerts answer (codec/alertmanager_alerts.hpp,
// fuzzed by codec/fuzz/alertmanager_fuzzer.cpp).
using codec::parseAlerts;

// The alert list the source hands on after a failed read: one alert that
// applies to every pool, whose name says what failed.
std::vector<model::ActiveAlert> unreachableAlerts();

struct AlertSourceOptions {
  std::string url;  // http://host:port[/prefix]
  std::chrono::milliseconds interval{30'000};
  std::chrono::milliseconds timeout{5'000};
  std::string poolLabel = "gpu_pool";
  observability::Registry* metrics = nullptr;
  // Called on the writer thread after the alerts changed (the auditor's wakeAll).
  std::function<void()> changed;
};

class AlertSource {
 public:
  AlertSource(state::Writer& writer, AlertSourceOptions options);
  ~AlertSource();
  AlertSource(const AlertSource&) = delete;
  AlertSource& operator=(const AlertSource&) = delete;

  // Reads once now and hands the result to the writer (the polling thread's step).
  void pollOnce();
  void start();
  void stop();

 private:
  struct Failure {
    std::string message;
  };
  // The body of GET url+path, or what failed.
  Expected<std::string, Failure> fetch();

  state::Writer& writer_;
  AlertSourceOptions options_;
  std::string host_, port_, prefix_;
  std::string urlError_;
  observability::Family<observability::Counter>* polls_ = nullptr;
  observability::Gauge* alerts_ = nullptr;
  std::jthread thread_;
};

}  // namespace tally::controller
