#include "tally/model/report.hpp"

#include "tally/model/capacity.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

Report buildReport(const Cluster& cluster, const AuditOptions& options) {
  Report report;
  for (const auto& [name, cls] : cluster.classes) {
    PoolReport pool;
    pool.pool = name;
    pool.invariant = evaluateInvariant(cluster, cls);
    pool.findings = auditPool(cluster, cls, options);
    pool.gate = evaluateGate(cluster, cls, pool.findings);
    report.pools.push_back(std::move(pool));
  }
  TotalsCapacityView view(cluster, computeUsage(cluster));
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
      if (served.notServed)
        row.reason = served.notServed->message;
      else if (!served.shortfall.empty())
        row.reason = served.shortfall;
      break;
    }
    if (row.pool.empty()) row.reason = "in no GPU pool";
    report.nodes.push_back(std::move(row));
  }
  return report;
}

}  // namespace tally::model
