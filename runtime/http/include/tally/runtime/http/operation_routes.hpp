#pragma once
// The operations routes every Tally binary serves the same way: /healthz
// (the process answers), /readyz (the owner says whether it can do its job,
// and why not) and /metrics (the owner's exposition text).

#include <functional>
#include <string>

#include "tally/runtime/http/server.hpp"

namespace tally::runtime::http {

struct Readiness {
  bool ready = true;
  std::string reason;  // why not, for the 503's body
};

struct OperationRoutes {
  std::function<Readiness()> readiness;  // null: always ready
  std::function<std::string()> metrics;  // null: no /metrics route
  std::string metricsContentType = "text/plain; version=0.0.4; charset=utf-8";
};

// GET /healthz → 200 "ok"; GET /readyz → 200 "ok" or 503 with the reason;
// GET /metrics → 200 with the exposition. Labels "healthz", "readyz", "metrics".
void addOperationRoutes(Router& router, OperationRoutes routes);

}  // namespace tally::runtime::http
