#pragma once
// The cluster bench_controller decides on, and the orders it sends: vm-passthrough
// nodes with 8 H200 each, partly used by held devices, running VMs and GPU pods;
// tenants under organizations with a budget, and one organization out of budget
// so that some orders are refused.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::bench {

inline constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";
inline constexpr std::string_view kClassName = "nvidia-h200-passthrough";
inline constexpr int kUnitsPerNode = 8;
inline constexpr int kOrganizations = 20;
// The last organization's budget is spent: every order of its tenants is refused.
inline constexpr int kExhaustedOrganization = kOrganizations - 1;

// "n-00042": the prefix and width tally-fixtures uses.
std::string nodeName(std::size_t i);

// `nodes` nodes; of every 10: one full (a Bound device of 8), three running a
// VM (an Attached device of 2 and its launcher pod), two holding a Bound device
// of 4, one running a raw GPU pod of 3, three free (about 31% of units used).
model::Cluster benchCluster(std::size_t nodes);

// One GPUDevice order as the API server would create it.
struct Order {
  model::GpuDevice device;   // Pending, created in order
  bool withinBudget = true;  // false: its tenant's organization is out of budget
};

// `placeable` orders of counts 1..4 from the tenants with a budget, and one in
// every 20 more from the exhausted organization; in creation order.
std::vector<Order> benchOrders(std::size_t placeable);

// The AdmissionReview v1 CREATE the API server sends for `order`.
std::string createReview(const model::GpuDevice& order, std::size_t serial);

// A raw pod in the order's namespace asking the same units of the same
// resource, as the extender's filter sees it (Pending, not bound).
model::Pod rawPodFor(const model::GpuDevice& order);

}  // namespace tally::bench
