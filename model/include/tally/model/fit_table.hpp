#pragma once
// Per-node facts of one snapshot laid out for the extender's hot path: for every
// resource name a class sells, which class serves it on each node, whether the
// node is eligible, and its served, used and held units. filter() reaches the
// same verdict as filterNode() (the same decision code runs on both) with a few
// array reads per node instead of map lookups.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

class FitTable {
 public:
  // Reads every node once. The table answers for `cluster` only: keep both alive
  // together (the extender publishes them in one snapshot).
  static FitTable build(const Cluster& cluster, const CapacityView& view);

  FitTable() = default;
  FitTable(const FitTable&) = delete;
  FitTable& operator=(const FitTable&) = delete;
  FitTable(FitTable&&) = default;
  FitTable& operator=(FitTable&&) = default;

  // The row of a node, by name.
  std::optional<std::uint32_t> find(std::string_view node) const;
  const std::string& nodeName(std::uint32_t row) const { return names_[row]; }
  std::size_t size() const { return names_.size(); }

  NodeVerdict filter(const Cluster& cluster, const PodDemand& demand, std::uint32_t row) const;

 private:
  struct Slot {
    std::int32_t cls = -1;  // index into classes_, -1: no class serves the resource here
    bool eligible = false;
    std::int64_t served = 0;
    std::int64_t used = 0;
    std::int64_t held = 0;
  };
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<std::string> resources_;
  std::vector<const DeviceClass*> classes_;
  std::vector<std::string> names_;
  std::vector<const Node*> nodes_;
  std::vector<Slot> slots_;  // names_.size() x resources_.size()
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> rows_;
};

}  // namespace tally::model
