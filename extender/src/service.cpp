#include "tally/extender/service.hpp"

#include "tally/extender/verbs.hpp"
#include "tally/observability/log.hpp"

namespace tally::extender {

ExtenderService::ExtenderService(const SnapshotCell<ExtenderSnapshot>& snapshots, ExtenderMetrics& metrics,
                                 ServiceOptions options, PodBinder* binder)
    : snapshots_(snapshots), metrics_(metrics), options_(std::move(options)), binder_(binder) {}

HttpResponse ExtenderService::badRequest(const wire::BadRequest& error) {
  metrics_.rejected(error.kind);
  observability::logDebug("bad request", {{"kind", error.kind}, {"error", error.message}});
  return errorResponse(400, error.message);
}

HttpResponse ExtenderService::filter(std::string& body) {
  auto args = wire::parseExtenderArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  DecisionTally tally;
  HttpResponse r;
  {
    auto snap = snapshots_.read();
    r.body = filterResponse(*snap, args.value, &tally);
  }
  metrics_.decisions(tally);
  return r;
}

HttpResponse ExtenderService::prioritize(std::string& body) {
  auto args = wire::parseExtenderArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  HttpResponse r;
  auto snap = snapshots_.read();
  r.body = prioritizeResponse(*snap, args.value, options_.strategy);
  return r;
}

HttpResponse ExtenderService::preempt(std::string& body) {
  auto args = wire::parsePreemptionArgs(body);
  if (!args.ok()) return badRequest(args.errors.front());
  HttpResponse r;
  auto snap = snapshots_.read();
  r.body = wire::encode(preemptVictims(*snap, args.value));
  return r;
}

void ExtenderService::bind(std::string& body, Respond respond) {
  auto args = wire::parseBindingArgs(body);
  if (!args.ok()) return respond(badRequest(args.errors.front()));
  if (!binder_) {
    metrics_.bind("disabled");
    HttpResponse r;
    r.body = wire::encodeError("tally-extender runs without a Kubernetes client and cannot bind");
    return respond(std::move(r));
  }
  binder_->bind(std::move(args.value), [this, respond = std::move(respond)](std::string_view outcome, std::string error,
                                                                   PodBinder::Times times) {
    metrics_.bind(outcome, times.assumeSeconds, times.postSeconds);
    HttpResponse r;
    r.body = wire::encodeError(error);
    respond(std::move(r));
  });
}

HttpResponse ExtenderService::healthz() const {
  HttpResponse r;
  r.contentType = "text/plain; charset=utf-8";
  r.body = "ok\n";
  return r;
}

HttpResponse ExtenderService::readyz() const {
  HttpResponse r;
  r.contentType = "text/plain; charset=utf-8";
  auto snap = snapshots_.read();
  if (snap->ready()) {
    r.body = "ok\n";
  } else {
    r.status = 503;
    r.body = snap->notReadyReason() + "\n";
  }
  return r;
}

HttpResponse ExtenderService::metrics() const {
  HttpResponse r;
  r.contentType = std::string(observability::kTextContentType);
  r.body = metrics_.registry().render();
  return r;
}

void ExtenderService::addVerbRoutes(Router& router) {
  auto sync = [](auto method) {
    return [method](HttpRequest& req, Respond respond) { respond(method(req.body)); };
  };
  router.add("POST", options_.urlPrefix + "/filter", "filter", sync([this](std::string& b) { return filter(b); }));
  router.add("POST", options_.urlPrefix + "/prioritize", "prioritize",
             sync([this](std::string& b) { return prioritize(b); }));
  router.add("POST", options_.urlPrefix + "/preempt", "preempt", sync([this](std::string& b) { return preempt(b); }));
  router.add("POST", options_.urlPrefix + "/bind", "bind",
             [this](HttpRequest& req, Respond respond) { bind(req.body, std::move(respond)); });
}

void ExtenderService::addOperationRoutes(Router& router) {
  router.add("GET", "/healthz", "healthz", [this](HttpRequest&, Respond respond) { respond(healthz()); });
  router.add("GET", "/readyz", "readyz", [this](HttpRequest&, Respond respond) { respond(readyz()); });
  router.add("GET", "/metrics", "metrics", [this](HttpRequest&, Respond respond) { respond(metrics()); });
}

HttpObserver ExtenderService::observer() {
  HttpObserver o;
  o.onResponse = [this](std::string_view route, int status, double seconds, double handling) {
    metrics_.response(route, status, seconds, handling);
  };
  o.onRejected = [this](std::string_view kind) { metrics_.rejected(kind); };
  return o;
}

}  // namespace tally::extender
