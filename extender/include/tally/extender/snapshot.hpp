#pragma once
// What one request reads: the cluster the model decides on (without the pods
// map: pods are many, and their sums are in the usage snapshot), the usage
// sums frozen at the same moment, and the bound pods per node that preemption
// needs to find victims by UID. Immutable once published.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/fit_table.hpp"
#include "tally/model/index.hpp"

namespace tally::extender {

// Non-terminal pods bound to one node (GPU pods only: the rest use no units).
using BoundPods = std::vector<model::Pod>;

struct ExtenderSnapshot {
  model::Cluster cluster;  // pods left empty
  model::UsageSnapshot usage;
  // Per-node facts for filter, built once per publish over `cluster` and `usage`.
  model::FitTable fit;
  // Rows are shared between snapshots; only nodes that changed get a new row.
  std::unordered_map<std::string, std::shared_ptr<const BoundPods>> podsOnNode;
  std::uint64_t generation = 0;
  std::chrono::steady_clock::time_point publishedAt{};
  std::vector<model::Kind> unsynced;  // watched kinds whose cache has not synced
  std::size_t assumedPlacements = 0;

  bool ready() const { return unsynced.empty(); }
  const model::Pod* boundPod(std::string_view node, std::string_view uid) const;
  // "the Pod, GpuDevice caches are not synced yet"
  std::string notReadyReason() const;
};

}  // namespace tally::extender
