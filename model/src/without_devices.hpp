#pragma once
// A CapacityView without the budget usage of some Pending devices, shared by
// the rule files (not part of the API): the binder's arrival order and the VM
// door's set both decide on budgets that already count members being placed.

#include <map>
#include <string>
#include <string_view>

#include "lookup.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/usage.hpp"

namespace tally::model::detail {

class WithoutDevices final : public CapacityView {
 public:
  WithoutDevices(const Cluster& cluster, const CapacityView& base) : cluster_(cluster), base_(base) {}
  void leaveOut(const GpuDevice& d) {
    for (const auto& [key, units] : deviceUsage(d, cluster_).budget) {
      namespaceLess_[d.ns].add(key, units);
      for (const auto& ns : chainOf(cluster_, d.ns)) subtreeLess_[ns].add(key, units);
    }
  }
  std::int64_t nodeUsed(std::string_view n, std::string_view r) const override { return base_.nodeUsed(n, r); }
  std::int64_t nodeHeld(std::string_view n, std::string_view r) const override { return base_.nodeHeld(n, r); }
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override {
    return base_.subtreeUsed(ns, key) - less(subtreeLess_, ns, key);
  }
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override {
    return base_.namespaceUsed(ns, key) - less(namespaceLess_, ns, key);
  }
  bool counts(const Pod& pod) const override { return base_.counts(pod); }
  std::int64_t subtreePlaced(std::string_view ns, std::string_view r) const override {
    return base_.subtreePlaced(ns, r);
  }
  std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const override {
    return base_.poolFreeUnits(cluster, pool);
  }
  std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view key) const override {
    return base_.claimAsks(cluster, key);
  }

 private:
  static std::int64_t less(const std::map<std::string, ResourceList, std::less<>>& m, std::string_view key,
                           std::string_view resource) {
    auto it = m.find(key);
    return it == m.end() ? 0 : it->second.get(resource);
  }
  const Cluster& cluster_;
  const CapacityView& base_;
  std::map<std::string, ResourceList, std::less<>> namespaceLess_, subtreeLess_;
};

}  // namespace tally::model::detail
