#pragma once
// What a reader of the cluster state sees: the cluster the model decides on
// (without the pods and ResourceClaims maps: they are many and change often,
// and their sums are in the usage snapshot), the usage sums frozen at the same moment, the FitTable over both,
// which watched kinds have not synced, and the part each extension of the
// writer published beside them (extension.hpp). Immutable once published.
//
// Successive snapshots share what did not change: the cluster until an object
// other than a pod or a claim changes, the usage sums bucket by bucket, the FitTable
// block by block. The shared parts are reference-counted without atomics on
// the read path: readers never copy a snapshot's shared pointers, and retired
// snapshots are freed by the writer (see tally/common/snapshot_cell.hpp).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/fit_table.hpp"
#include "tally/model/index.hpp"

namespace tally::state {

struct Snapshot {
  std::shared_ptr<const model::Cluster> base;  // pods and claims left empty; never null once published
  model::UsageSnapshot usage;
  // Per-node facts for filter and prioritize, over `base` and `usage`.
  model::FitTable fit;
  std::uint64_t generation = 0;
  std::chrono::steady_clock::time_point publishedAt{};
  std::vector<model::Kind> unsynced;  // watched kinds whose cache has not synced
  std::size_t assumedPlacements = 0;  // placements the index counts ahead of the watch

  const model::Cluster& cluster() const { return *base; }
  bool ready() const { return unsynced.empty(); }
  // "the Pod, GpuDevice caches are not synced yet"
  std::string unsyncedCaches() const;

  // The part the writer's Extension<Part> published; null when it has none.
  template <class Part>
  const Part* part() const {
    for (const Published& p : parts_) {
      if (p.type == typeid(Part)) return static_cast<const Part*>(p.value.get());
    }
    return nullptr;
  }

 private:
  friend class Writer;
  struct Published {
    std::type_index type;  // the Part of the Extension<Part> that published it
    std::shared_ptr<const void> value;
  };
  std::vector<Published> parts_;
};

}  // namespace tally::state
