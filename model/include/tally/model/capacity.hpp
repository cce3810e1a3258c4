#pragma once
// Read access to node and tenant usage, implemented both by totals recomputed
// from scratch and by the incremental index, so every decision is written once.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tally/model/budget.hpp"
#include "tally/model/cluster.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

class CapacityView : public UsageReader {
 public:
  // Units of `resource` in use on the node: held devices + raw pods + assumed.
  virtual std::int64_t nodeUsed(std::string_view node, std::string_view resource) const = 0;
  // Units of `resource` held on the node by Bound/Attached devices.
  virtual std::int64_t nodeHeld(std::string_view node, std::string_view resource) const = 0;
  // Whether the pod's own usage is already part of these totals (a pending pod
  // the cache has seen), so a budget check does not charge it twice.
  virtual bool counts(const Pod& pod) const = 0;
  // Units of `resource` the subtree of `ns` occupies on nodes: bound pods (after
  // coverage), devices holding units, and assumed placements. Unlike budget
  // usage, pending pods occupy nothing.
  virtual std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const = 0;
  // Free units of the whole pool (sum over its nodes). The default scans the
  // nodes; the incremental index answers from running totals.
  virtual std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const;
  // Units of the pool ResourceClaims ask for that the allocator has not
  // allocated yet (claimPendingUnits): demand on the pool the claim door
  // counts. The default scans the claims; the index answers from a total.
  virtual std::int64_t pendingClaimUnits(const Cluster& cluster, const DeviceClass& pool) const;
  // What the ResourceClaim `claimKey` ("ns/name") still asks of its pools
  // (claimPendingUnits, by GPU class name): empty once it is allocated (its
  // node's usage counts it) or when it asks no pool Tally sells; nullopt when
  // the view does not hold the claim (not created, or not seen yet). The
  // default reads the cluster's claims; the index and its snapshots keep the
  // answer for every claim, as they keep no claim objects in snapshots.
  virtual std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view claimKey) const;
};

// A view over totals recomputed from scratch (tallyctl, tests, the controller).
class TotalsCapacityView final : public CapacityView {
 public:
  TotalsCapacityView(const Cluster& cluster, UsageTotals totals);
  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override;
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override;
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override;
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override;
  bool counts(const Pod& pod) const override;
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override;
  const UsageTotals& totals() const { return totals_; }

 private:
  const Cluster* cluster_;
  UsageTotals totals_;
  TotalsUsageReader reader_;
  std::map<std::string, ResourceList, std::less<>> placedSubtree_;
};

// Free units of the class on the node: served minus used (never negative).
std::int64_t freeUnits(const Node& node, const DeviceClass& cls, const CapacityView& view);

// A node of a pool on which more units are in use than it serves: held devices
// plus raw pod usage plus assumed placements above units(node, class). Nothing
// any door decided can get there (a pod another scheduler placed, a preset
// spec.nodeName, a device that went unhealthy under its holders), and the
// kubelet cannot see units a Bound GPUDevice holds: the audit's NodeOvercommitted.
struct NodeOvercommit {
  std::string node;
  std::int64_t served = 0;  // units the node serves the class
  std::int64_t used = 0;    // held + raw pods + assumed
  std::int64_t held = 0;    // of which by Bound/Attached GPUDevices
  // The holders on the node, "namespace/name (units)": devices from the
  // cluster, pods when the cluster holds them (the controller's snapshot keeps
  // pods only as sums: its auditor names them from the writer's live index).
  std::vector<std::string> devices;
  std::vector<std::string> pods;
  std::vector<std::string> claims;  // allocated ResourceClaims of DRA pools
  std::string message() const;
};

// The over-commit of an eligible node (Ready, schedulable, in the class's mode:
// an ineligible node serves nothing by rule while its holders drain, which is
// no over-commit); nullopt when used <= served.
std::optional<NodeOvercommit> nodeOvercommit(const Cluster& cluster, const Node& node, const DeviceClass& cls,
                                             const CapacityView& view);

// The class serving `resource` on a node: same resource name and the node's
// expected mode. Null when no class does.
const DeviceClass* classServing(const Cluster& cluster, const Node& node, std::string_view resource);

// The classes selling `resource` (any node mode).
std::vector<const DeviceClass*> classesFor(const Cluster& cluster, std::string_view resource);

// Units of the pool held by active (and releasing: a release keeps its capacity
// until released) reservations of organizations other than `org` that those
// organizations do not use yet (idle reserved capacity).
std::int64_t idleReservedByOthers(const Cluster& cluster, const CapacityView& view, const DeviceClass& pool,
                                  const Organization* org);

}  // namespace tally::model
