#include "tally/extender/service.hpp"

#include "tally/extender/verbs.hpp"
#include "tally/common/log.hpp"

namespace tally::extender {

http::Response errorResponse(int status, std::string_view message) {
  http::Response r;
  r.status = status;
  r.body = wire::encodeError(message);
  return r;
}

http::ServerOptions serverOptions() {
  http::ServerOptions o;
  o.serverHeader = "tally-extender";
  o.threadName = "tally-http";
  o.errorBody = errorResponse;
  return o;
}

ExtenderService::ExtenderService(const SnapshotCell<ExtenderSnapshot>& snapshots, ExtenderMetrics& metrics,
                                 ServiceOptions options, PodBinder* binder)
    : snapshots_(snapshots), metrics_(metrics), options_(std::move(options)), binder_(binder) {}

http::Response ExtenderService::badRequest(const wire::BadRequest& error) {
  metrics_.rejected(error.kind);
  logDebug("bad request", {{"kind", error.kind}, {"error", error.message}});
  return errorResponse(400, error.message);
}

http::Response ExtenderService::filter(std::string& body) {
  auto args = wire::parseExtenderArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  DecisionTally tally;
  http::Response r;
  // Filled here, then swapped with the kept one: its buffers serve the next
  // filter on this thread.
  thread_local FilterScores scores;
  {
    auto snap = snapshots_.read();
    r.body = filterResponse(*snap, args.value, &tally, scores, options_.strategy);
  }
  {
    std::lock_guard lock(filterScoresMutex_);
    if (scores.kept) {
      std::swap(filterScores_, scores);
      filterScoresAt_ = std::chrono::steady_clock::now();
    } else {
      filterScores_.kept = false;
    }
  }
  metrics_.decisions(tally);
  return r;
}

http::Response ExtenderService::prioritize(std::string& body) {
  auto args = wire::parseExtenderArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  http::Response r;
  bool fromFilter = false;
  {
    std::lock_guard lock(filterScoresMutex_);
    if (std::chrono::steady_clock::now() - filterScoresAt_ < kFilterScoresKept) {
      if (auto answer = prioritizeFromFilter(filterScores_, args.value, options_.strategy)) {
        r.body = std::move(*answer);
        fromFilter = true;
      }
    }
  }
  metrics_.prioritizeAnswered(fromFilter);
  if (!fromFilter) {
    auto snap = snapshots_.read();
    r.body = prioritizeResponse(*snap, args.value, options_.strategy);
  }
  return r;
}

http::Response ExtenderService::preempt(std::string& body) {
  auto args = wire::parsePreemptionArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  http::Response r;
  auto snap = snapshots_.read();
  r.body = wire::encode(preemptVictims(*snap, args.value));
  return r;
}

void ExtenderService::bind(std::string& body, http::Respond respond) {
  auto args = wire::parseBindingArgs(body);
  if (!args.ok()) return respond(badRequest(args.errors.front()));
  if (args.value.podUid.empty()) {
    // kube-scheduler always sends the UID; without it the binding could land
    // on a pod re-created under the same name, whose units nobody checked.
    return respond(badRequest({"missing", "BindingArgs.PodUID is required (pod " + args.value.podNamespace + "/" +
                                              args.value.podName + ")"}));
  }
  if (!binder_) {
    metrics_.bind("disabled");
    http::Response r;
    r.body = wire::encodeError("tally-extender runs without a Kubernetes client and cannot bind");
    return respond(std::move(r));
  }
  binder_->bind(std::move(args.value), [this, respond = std::move(respond)](std::string_view outcome, std::string error,
                                                                            PodBinder::Times times) {
    metrics_.bind(outcome, times.assumeSeconds, times.postSeconds);
    http::Response r;
    r.body = wire::encodeError(error);
    respond(std::move(r));
  });
}

http::Readiness ExtenderService::readiness() const {
  auto snap = snapshots_.read();
  if (snap->ready()) return {};
  return {false, notReadyReason(*snap)};
}

std::string ExtenderService::metricsText() const { return metrics_.registry().render(); }

void ExtenderService::addVerbRoutes(http::Router& router) {
  auto sync = [](auto method) {
    return [method](http::Request& req, http::Respond respond) { respond(method(req.body())); };
  };
  const http::Caller caller = options_.verbCallers;
  router.add("POST", options_.urlPrefix + "/filter", "filter", sync([this](std::string& b) { return filter(b); }),
             caller);
  router.add("POST", options_.urlPrefix + "/prioritize", "prioritize",
             sync([this](std::string& b) { return prioritize(b); }), caller);
  router.add("POST", options_.urlPrefix + "/preempt", "preempt", sync([this](std::string& b) { return preempt(b); }),
             caller);
  router.add(
      "POST", options_.urlPrefix + "/bind", "bind",
      [this](http::Request& req, http::Respond respond) { bind(req.body(), std::move(respond)); }, caller);
}

void ExtenderService::addOperationRoutes(http::Router& router) {
  http::OperationRoutes routes;
  routes.readiness = [this] { return readiness(); };
  routes.metrics = [this] { return metricsText(); };
  routes.metricsContentType = std::string(observability::kTextContentType);
  http::addOperationRoutes(router, std::move(routes));
}

http::Observer ExtenderService::observer() {
  http::Observer o;
  o.onResponse = [this](std::string_view route, int status, double seconds, double handling) {
    metrics_.response(route, status, seconds, handling);
  };
  o.onRejected = [this](std::string_view kind) { metrics_.rejected(kind); };
  return o;
}

}  // namespace tally::extender
