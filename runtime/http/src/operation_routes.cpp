#include "tally/runtime/http/operation_routes.hpp"

#include <memory>

namespace tally::runtime::http {

namespace {

Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.contentType = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

}  // namespace

void addOperationRoutes(Router& router, OperationRoutes routes) {
  auto shared = std::make_shared<const OperationRoutes>(std::move(routes));
  router.add("GET", "/healthz", "healthz", [](Request&, Respond respond) { respond(text(200, "ok\n")); });
  router.add("GET", "/readyz", "readyz", [shared](Request&, Respond respond) {
    Readiness r = shared->readiness ? shared->readiness() : Readiness{};
    respond(r.ready ? text(200, "ok\n") : text(503, r.reason + "\n"));
  });
  if (shared->metrics) {
    router.add("GET", "/metrics", "metrics", [shared](Request&, Respond respond) {
      Response r;
      r.contentType = shared->metricsContentType;
      r.body = shared->metrics();
      respond(std::move(r));
    });
  }
}

}  // namespace tally::runtime::http
