#pragma once
// Dynamic Resource Allocation pools (SPEC 3.7): what a GPUDeviceClass with
// spec.dra is served from ResourceSlices, and what ResourceClaims take of it.
// Counted once, here, for every door, the audit, the dashboard and tallyctl.
//
// A driver's pool is known only when every slice of its newest generation has
// been seen (pool.resourceSliceCount of them); the devices of an incomplete
// pool serve nothing and make the node's figure for every class counting them
// unknown (fail closed). A device tainted NoSchedule or NoExecute (by its
// slice or a DeviceTaintRule) is unhealthy. The slices are folded into their
// nodes (Node::dra), so the unit rules read a node alone, as for device
// plugins.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

// The annotation kube-scheduler puts on the claim it creates for a pod's
// extended-resource request served by DRA.
inline constexpr std::string_view kAnnotationExtendedResourceClaim = "resource.kubernetes.io/extended-resource-claim";
// The extended resource name Kubernetes gives a DeviceClass without
// spec.extendedResourceName: "deviceclass.resource.kubernetes.io/<class>".
// A DRA GPUDeviceClass without spec.resourceName sells its units under it, so
// its quota key is the one ResourceQuota charges such requests to.
std::string draImplicitResourceName(std::string_view deviceClassName);
// The key Kubernetes' ResourceQuota counts the devices claims request of a
// DeviceClass by: "<class>.deviceclass.resource.k8s.io/devices". The quota
// reconciler writes it beside the pool's own key, with the same figure.
std::string draDevicesQuotaKey(std::string_view deviceClassName);

// One driver's pool as its slices describe it.
struct DraPoolState {
  std::string driver;
  std::string pool;
  std::int64_t generation = 0;          // the newest generation any slice carries
  std::int64_t resourceSliceCount = 0;  // what the newest slices say the pool has
  std::int64_t seen = 0;                // slices of that generation in the cache
  bool complete() const { return resourceSliceCount > 0 && seen >= resourceSliceCount; }
  // "ResourceSlice pool gpu.nvidia.com/gpu-h200-1 generation 3: 1 of 2 slice(s) seen"
  std::string describe() const;
  friend bool operator==(const DraPoolState&, const DraPoolState&) = default;
};

using DraPoolKey = std::pair<std::string, std::string>;  // (driver, pool)
// The state of one pool from its slices (any order).
DraPoolState draPoolState(std::string_view driver, std::string_view pool,
                          const std::vector<const ResourceSlice*>& slices);
std::map<DraPoolKey, DraPoolState> draPools(const ClusterObjects& cluster);

// The nodes a slice puts devices on (its nodeName, or each device's under
// perDeviceNodeSelection). A slice for all nodes or a node selector names
// none: GPUs are node-local, such devices serve no pool Tally counts.
std::set<std::string> sliceNodes(const ResourceSlice& slice);

// What one slice puts on the node, if it is of its pool's newest generation
// and has devices there (with the taints of the rules selecting them).
std::optional<DraNodeSlice> foldSlice(const ResourceSlice& slice, std::string_view node, const DraPoolState& pool,
                                      const std::map<std::string, DeviceTaintRule>& rules);
// Sets every node's Node::dra from the cluster's slices and taint rules (what
// a snapshot loader and a test do once; the index keeps it current).
void foldDraInventory(ClusterObjects& cluster);

// Whether the device is one of the class's: the class's driver, and every
// attribute it names equal to the device's (the key as the slice writes it,
// or without its domain). False for classes without spec.dra.
bool draMember(const DeviceClass& cls, const DraNodeSlice& slice, const DraDevice& device);
// Whether the node has any device of the class (healthy, known or not).
bool draInPool(const Node& node, const DeviceClass& cls);

// Bytes one share of a shared DRA class is worth in its shareCapacity
// (share.memoryMiB MiB).
std::int64_t draShareBytes(const DeviceClass& cls);

// Units one healthy device is worth to the class: 1 for a whole-device class;
// for a shared class its shareCapacity over draShareBytes (capped by the
// share's corePercent and maxSharesPerDevice) when the device allows multiple
// allocations and has that capacity, else the class's sharesPerDevice.
std::int64_t draDeviceUnits(const DeviceClass& cls, const DraDevice& device);

// What the class's devices on one node serve.
struct DraNodeUnits {
  std::int64_t units = 0;
  std::int64_t devices = 0;            // healthy devices behind those units
  std::int64_t unhealthyDevices = 0;   // tainted members
  std::vector<std::string> unknown;    // incomplete pools with members on the node (describe())
  std::vector<std::string> unhealthy;  // "pool/device: taint key=value:Effect"
  friend bool operator==(const DraNodeUnits&, const DraNodeUnits&) = default;
};
// The class's healthy members of complete pools on the node. Devices that
// consume a slice's shared counters (partitions of one GPU) count as many at
// once as the counters allow, smallest consumers first.
DraNodeUnits draUnitsOn(const Node& node, const DeviceClass& cls);

// The GPU class a request's DeviceClass draws on (before allocation); null
// when no GPUDeviceClass names it.
const DeviceClass* draClassForRequest(const ClusterObjects& cluster, std::string_view deviceClassName);

// What one claim takes: node units (allocated claims) and budget (allocated,
// or what it requests while not allocated: as Kubernetes' ResourceQuota
// charges a claim from its creation). adminAccess takes nothing; a claim the
// scheduler made for a pod's extended-resource request takes nothing (the
// pod's request counts those units once).
struct ClaimUsage {
  std::string node;       // the allocation's node ("" when none)
  ResourceList capacity;  // by class resourceName, on `node`
  ResourceList budget;    // by quota key, charged to the claim's namespace
  bool allocated = false;
  // Results naming a device no slice of a complete pool lists on the node
  // (its slice gone or not seen): charged as a whole device of the request's
  // class, and listed ("driver/pool/device").
  std::vector<std::string> unresolved;
  friend bool operator==(const ClaimUsage&, const ClaimUsage&) = default;
};
ClaimUsage claimUsage(const ClusterObjects& cluster, const ResourceClaim& claim);
// Whether `usage` (claimUsage of the claim) may change when some node's
// devices change: an allocation not resolved on its node, or a request whose
// units depend on the devices (All, or a shared class's whole device).
// Every other claim's charge depends on its own node only.
bool claimUsageDependsOnInventory(const ClusterObjects& cluster, const ResourceClaim& claim, const ClaimUsage& usage);

// What a claim not allocated yet will take of its pools, by GPU class name:
// for each request the units of its first choice of a GPU class (empty for
// an allocated, deleting or extended-resource claim, and for one whose first
// choice is adminAccess or no GPU Tally sells).
ResourceList claimPendingUnits(const ClusterObjects& cluster, const ResourceClaim& claim);

// Units one choice of a request asks of its class `cls` before allocation:
// count devices (All: the most units one node has); for a shared class the
// capacity it requests in shares rounded up (without one, a whole device's
// shares).
std::int64_t choiceUnits(const ClusterObjects& cluster, const DeviceClass& cls, const DraRequestChoice& choice);

// Units a request asks of each class before allocation (by quota key): count
// devices (All: the most units one node has), for a shared class the capacity
// it requests in shares rounded up (without one, a whole device's shares);
// firstAvailable: the largest of its choices.
ResourceList requestedUnits(const ClusterObjects& cluster, const DraRequest& request);

// --- Pods that name ResourceClaims -----------------------------------------
//
// kube-scheduler asks an extender about a pod only when the pod requests one of
// the extender's managedResources, and a pod that only names claims requests
// none: without more its node would be chosen by the allocator alone, blind to
// Tally's held devices, idle reservations and closed gates. So the placement
// door routes such a pod to a Tally profile and adds this extended resource (1,
// requests and limits, to its first container); the scheduler configuration
// lists it `ignoredByScheduler: true`, and a kubelet ignores an extended
// resource its node does not advertise. No class sells it: it is no GPU.
inline constexpr std::string_view kClaimPodMarker = "gpu.tally.dev/claims";

// Whether Tally decides where a pod naming ResourceClaims runs: it names one
// and some GPUDeviceClass is a DRA pool. Every such pod is decided, not only
// those whose claims are known to draw on a pool: a template's claims do not
// exist at the pod's CREATE, and the claims of no pool pass the filter.
bool claimPodDecided(const ClusterObjects& cluster, const Pod& pod);
// Whether the pod carries kClaimPodMarker in a container's requests.
bool carriesClaimMarker(const Pod& pod);
// Whether such a pod needs the marker: it asks no GPU resource of its own (one
// it asks is among the extender's managedResources already). A pod asking an
// extended resource a DeviceClass serves must not carry it either: the
// scheduler's DRA plugin would find no node advertising the marker.
bool needsClaimMarker(const Cluster& cluster, const Pod& pod);

class CapacityView;
// What a pod's claims still ask of Tally's pools, before their allocation:
// claimPendingUnits of each claim the pod names (view.claimAsks), by the GPU
// class's resourceName, so the node filter counts them as a pod's own units.
// The budget is not asked again: a claim is charged from its creation. An
// allocated claim asks nothing more (its node already counts it). `unseen`
// names what cannot be counted yet: an entry whose template's claim is not
// made, or a claim the view does not hold.
struct PodClaimUnits {
  ResourceList byResource;
  ResourceList byClass;
  std::vector<std::string> unseen;
};
PodClaimUnits podClaimUnits(const ClusterObjects& cluster, const CapacityView& view, const Pod& pod);

}  // namespace tally::model
