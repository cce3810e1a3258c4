#pragma once
// The extender's HTTP face: parses a verb's request, reads one snapshot,
// calls the verb, encodes the answer and counts it. Also the operations
// routes (/healthz, /readyz, /metrics).

#include <string>

#include "tally/extender/http_server.hpp"
#include "tally/extender/metrics.hpp"
#include "tally/extender/pod_binder.hpp"
#include "tally/extender/snapshot_cell.hpp"

namespace tally::extender {

struct ServiceOptions {
  std::string urlPrefix = "/tally";
  model::ScoreStrategy strategy = model::ScoreStrategy::BinPack;
};

class ExtenderService {
 public:
  // `binder` may be null: bind then answers with an Error.
  ExtenderService(const SnapshotCell<ExtenderSnapshot>& snapshots, ExtenderMetrics& metrics, ServiceOptions options,
                  PodBinder* binder);

  HttpResponse filter(std::string& body);
  HttpResponse prioritize(std::string& body);
  HttpResponse preempt(std::string& body);
  void bind(std::string& body, Respond respond);

  HttpResponse healthz() const;
  HttpResponse readyz() const;
  HttpResponse metrics() const;

  // <prefix>/{filter,prioritize,preempt,bind} (POST) and the operations routes (GET).
  void addVerbRoutes(Router& router);
  void addOperationRoutes(Router& router);
  // Feeds the server's framing-level outcomes into the metrics.
  HttpObserver observer();

 private:
  HttpResponse badRequest(const wire::BadRequest& error);

  const SnapshotCell<ExtenderSnapshot>& snapshots_;
  ExtenderMetrics& metrics_;
  ServiceOptions options_;
  PodBinder* binder_;
};

}  // namespace tally::extender
