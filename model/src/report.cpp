#include "tally/model/report.hpp"

#include <fmt/format.h>

#include "tally/model/capacity.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

Report buildReport(const Cluster& cluster, const AuditOptions& options) {
  Report report;
  TotalsCapacityView recomputed(cluster, computeUsage(cluster));
  const CapacityView& view = options.usage ? *options.usage : recomputed;
  AuditOptions audit = options;
  audit.usage = &view;
  for (const auto& [name, cls] : cluster.classes) {
    PoolReport pool;
    pool.pool = name;
    pool.invariant = evaluateInvariant(cluster, cls);
    pool.findings = auditPool(cluster, cls, audit);
    pool.gate = evaluateGate(cluster, cls, pool.findings);
    report.pools.push_back(std::move(pool));
  }
  for (const auto& [name, node] : cluster.nodes) {
    NodeReport row;
    row.name = name;
    for (const auto& [className, cls] : cluster.classes) {
      if (!inPool(node, cls)) continue;
      row.pool = className;
      NodeUnits served = unitsServed(node, cls);
      row.unitsServed = served.units;
      row.unitsUsed = view.nodeUsed(name, cls.resourceName);
      row.unitsHeld = view.nodeHeld(name, cls.resourceName);
      row.unitsFree = std::max<std::int64_t>(0, served.units - row.unitsUsed);
      if (served.notServed) {
        row.reason = served.notServed->message;
      } else if (!served.shortfall.empty()) {
        row.reason = served.shortfall;
      }
      if (auto over = nodeOvercommit(cluster, node, cls, view)) {
        row.reason = fmt::format("OVERCOMMITTED: used {} > served {}", over->used, over->served);
      }
      break;
    }
    if (row.pool.empty()) row.reason = "in no GPU pool";
    report.nodes.push_back(std::move(row));
  }
  return report;
}

}  // namespace tally::model
