#pragma once
// The incremental usage index: per node per resource, per namespace per quota
// key, and per subtree, updated in O(depth) per object event from the same
// per-object contribution rules computeUsage() sums from scratch.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"
#include "tally/common/cow_map.hpp"

namespace tally::model {

// Hash maps keyed by name that can be searched with a string_view, so a lookup
// on the hot path allocates nothing.
struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using NameMap = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

class UsageSnapshot;

class UsageIndex final : public CapacityView {
 public:
  UsageIndex();
  ~UsageIndex() override;
  UsageIndex(const UsageIndex&);
  UsageIndex& operator=(const UsageIndex&);

  // Builds the index from a whole cluster (equivalent to replaying every object).
  static UsageIndex fromCluster(const Cluster& cluster);

  void upsertNode(const Node& node);
  void removeNode(std::string_view name);
  void upsertClass(const DeviceClass& cls);
  void removeClass(std::string_view name);
  void upsertNamespace(const Namespace& ns);
  void removeNamespace(std::string_view name);
  void upsertPod(const Pod& pod);
  void removePod(std::string_view ns, std::string_view name);
  void upsertDevice(const GpuDevice& device);
  void removeDevice(std::string_view ns, std::string_view name);
  void upsertVmi(const VirtualMachineInstance& vmi);
  void removeVmi(std::string_view ns, std::string_view name);
  // DRA: a slice refolds the nodes of its pool (Node::dra), a taint rule every
  // node with slices; a claim is charged like a held device (model/dra.hpp).
  void upsertResourceSlice(const ResourceSlice& slice);
  void removeResourceSlice(std::string_view name);
  void upsertResourceClaim(const ResourceClaim& claim);
  void removeResourceClaim(std::string_view ns, std::string_view name);
  void upsertDeviceTaintRule(const DeviceTaintRule& rule);
  void removeDeviceTaintRule(std::string_view name);

  // An in-flight placement the watch has not confirmed yet. Dropped by forget(),
  // or automatically when the pod is seen bound (or deleted).
  void assume(const Pod& pod, std::string_view node);
  void forget(std::string_view podUid);
  std::size_t assumedCount() const;

  // CapacityView
  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override;
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override;
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override;
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override;
  bool counts(const Pod& pod) const override;
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override;
  // `copy` was copied from this index's cluster just now (its nodes as they
  // are; its classes may carry the gates a door applies): until the next
  // call, pool totals asked about it come from the running sums, as for the
  // index's own cluster, instead of a walk over every node. The copy lags the
  // index as a published snapshot does. Null forgets it.
  void noteClusterCopy(const Cluster* copy);

  // O(1) from running totals when asked about the index's own cluster (or
  // the copy noted above).
  std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const override;
  std::int64_t pendingClaimUnits(const Cluster& cluster, const DeviceClass& pool) const override;
  // From the index's own claims, whatever cluster is passed.
  std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view claimKey) const override;

  // The objects the index holds, as a Cluster (the caller adds the kinds the
  // index does not track: quotas, organizations, plans, ledger, caches).
  const Cluster& cluster() const;
  Cluster& mutableClusterForUntrackedKinds();

  // The totals in the form computeUsage() returns (for equality checks).
  UsageTotals totals() const;

  // An immutable copy of the sums (not of the pods), cheap enough to publish to
  // lock-free readers after every batch of events: it shares storage with the
  // index, so copy and release it on the thread that writes the index.
  UsageSnapshot snapshot() const;

  // The nodes whose used, held or free units may have changed since the last
  // call (`all`: too many to list, e.g. after a class or node changed).
  struct TouchedNodes {
    bool all = false;
    std::vector<std::string> nodes;
  };
  TouchedNodes takeTouchedNodes();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The index's sums frozen at one moment. Pair it with a copy of the cluster
// taken at the same moment; it answers for that cluster only.
class UsageSnapshot final : public CapacityView {
 public:
  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override;
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override;
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override;
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override;
  // Knows only pods without a node (the pods a scheduler asks about): keeping
  // every bound pod would make each publish copy all of them.
  bool counts(const Pod& pod) const override;
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override;
  std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const override;
  std::int64_t pendingClaimUnits(const Cluster& cluster, const DeviceClass& pool) const override;
  // Every claim's answer, kept as sums are (snapshots hold no claim objects).
  std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view claimKey) const override;

 private:
  friend class UsageIndex;
  // Copies of the index's maps: they share every bucket no event touched since.
  CowMap<ResourceList> nodeUsed_, assumedUsed_, nodeHeld_, namespaceUsed_, subtreeUsed_, placedSubtree_;
  CowMap<std::int64_t> poolFree_;
  CowMap<std::int64_t> claimPending_;  // class -> units of claims not allocated yet
  CowMap<ResourceList> claimAsks_;     // claim key -> claimPendingUnits, every claim
  CowMap<std::string> unboundPods_;    // pod key -> uid, pods without a node
};

}  // namespace tally::model
