#pragma once
// What one request reads: the cluster the model decides on (without the pods
// map: pods are many, and their sums are in the usage snapshot), the usage
// sums frozen at the same moment, and the bound pods per node that preemption
// needs to find victims by UID. Immutable once published.
//
// Successive snapshots share what did not change: the cluster until an object
// other than a pod changes, the usage sums and bound pods bucket by bucket,
// the FitTable block by block. Publishing after a few pod events therefore
// costs little more than the rows those events touched. The shared parts are
// reference-counted without atomics on the read path: readers never copy a
// snapshot's shared pointers, and retired snapshots are freed by the writer.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/cow_map.hpp"
#include "tally/model/fit_table.hpp"
#include "tally/model/index.hpp"

namespace tally::extender {

// Non-terminal pods bound to one node (GPU pods only: the rest use no units).
using BoundPods = std::vector<model::Pod>;

struct ExtenderSnapshot {
  std::shared_ptr<const model::Cluster> base;  // pods left empty; never null once published
  model::UsageSnapshot usage;
  // Per-node facts for filter and prioritize, over `base` and `usage`.
  model::FitTable fit;
  // Bound GPU pods by node; a row is replaced only when a pod on it changed.
  model::CowMap<std::shared_ptr<const BoundPods>> podsOnNode;
  std::uint64_t generation = 0;
  std::chrono::steady_clock::time_point publishedAt{};
  std::vector<model::Kind> unsynced;  // watched kinds whose cache has not synced
  std::size_t assumedPlacements = 0;

  const model::Cluster& cluster() const { return *base; }
  bool ready() const { return unsynced.empty(); }
  const model::Pod* boundPod(std::string_view node, std::string_view uid) const;
  // "the Pod, GpuDevice caches are not synced yet"
  std::string notReadyReason() const;
};

}  // namespace tally::extender
