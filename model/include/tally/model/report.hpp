#pragma once
// The capacity report: every pool's invariant and audit, and every GPU node's
// units. What `tallyctl report` and the demo print, and what the controller
// publishes into GPUDeviceClass status.

#include <string>
#include <vector>

#include "tally/model/audit.hpp"
#include "tally/model/cluster.hpp"
#include "tally/model/pool.hpp"

namespace tally::model {

struct PoolReport {
  std::string pool;
  PoolInvariant invariant;
  std::vector<Finding> findings;
  GateState gate;
};

struct NodeReport {
  std::string name;
  std::string pool;  // the class whose pool the node belongs to ("" when none)
  std::int64_t unitsServed = 0;
  std::int64_t unitsUsed = 0;  // held + raw pod usage
  std::int64_t unitsHeld = 0;  // by Bound/Attached GPUDevices
  std::int64_t unitsFree = 0;
  std::string reason;  // why it serves nothing, or fewer units than its devices yield
};

struct Report {
  std::vector<PoolReport> pools;
  std::vector<NodeReport> nodes;
};

Report buildReport(const Cluster& cluster, const AuditOptions& options = {});

}  // namespace tally::model
