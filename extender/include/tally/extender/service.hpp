#pragma once
// The extender's HTTP face: parses a verb's request, reads one snapshot,
// calls the verb, encodes the answer and counts it. Also the operations
// routes (/healthz, /readyz, /metrics), served by the runtime's HTTP server.

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "tally/extender/metrics.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/extender/pod_binder.hpp"
#include "tally/common/snapshot_cell.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"

namespace tally::extender {

namespace http = runtime::http;

// A 4xx/5xx answer whose body is {"Error": message}, as kube-scheduler reads
// it; also the body of the server's own refusals (see serverOptions).
http::Response errorResponse(int status, std::string_view message);

// The runtime server's options as the extender serves: the error body above,
// `Server: tally-extender`, threads named tally-http-N.
http::ServerOptions serverOptions();

struct ServiceOptions {
  std::string urlPrefix = "/tally";
  model::ScoreStrategy strategy = model::ScoreStrategy::BinPack;
  // Who may call the verbs: kube-scheduler's verified client certificate, or
  // anyone who reaches the listener (a loopback-only sidecar).
  http::Caller verbCallers = http::Caller::Anyone;
};

class ExtenderService {
 public:
  // `binder` may be null: bind then answers with an Error.
  ExtenderService(const SnapshotCell<ExtenderSnapshot>& snapshots, ExtenderMetrics& metrics, ServiceOptions options,
                  PodBinder* binder);

  http::Response filter(std::string& body);
  http::Response prioritize(std::string& body);
  http::Response preempt(std::string& body);
  void bind(std::string& body, http::Respond respond);

  // Ready once every watched kind has synced (the snapshot says which has not).
  http::Readiness readiness() const;
  std::string metricsText() const;

  // <prefix>/{filter,prioritize,preempt,bind} (POST) and the operations routes (GET).
  void addVerbRoutes(http::Router& router);
  void addOperationRoutes(http::Router& router);
  // Feeds the server's framing-level outcomes into the metrics.
  http::Observer observer();

 private:
  http::Response badRequest(const wire::BadRequest& error);

  const SnapshotCell<ExtenderSnapshot>& snapshots_;
  ExtenderMetrics& metrics_;
  ServiceOptions options_;
  PodBinder* binder_;
  // The last filter's scores for the prioritize of its cycle
  // (prioritizeFromFilter), used while younger than kFilterScoresKept.
  static constexpr std::chrono::seconds kFilterScoresKept{1};
  std::mutex filterScoresMutex_;
  FilterScores filterScores_;
  std::chrono::steady_clock::time_point filterScoresAt_{};
};

}  // namespace tally::extender
