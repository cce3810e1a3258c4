#pragma once
// Usage and coverage (SPEC 3.2): what pods and held devices take, of a node's
// units and of a tenant's budget.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

// The Kubernetes effective request of a pod for one resource: the larger of the
// app containers plus restartable init containers, and each regular init
// container plus the sidecars started before it; plus overhead.
std::int64_t effectiveRequest(const Pod& pod, std::string_view resource);
// Every extended resource the pod requests, with its effective request.
ResourceList effectiveRequests(const Pod& pod);

// Whether the resource is a GPU in this cluster: a GPU vendor's name, or one a
// GPUDeviceClass sells (of any vendor), or a HAMi figure riding along.
bool isGpuResource(const Cluster& cluster, std::string_view resource);
// The pod's effective requests of GPU resources (isGpuResource).
ResourceList gpuRequests(const Cluster& cluster, const Pod& pod);
// Whether a pod may hold a GPU whatever classes exist: any extended resource
// request, or resource claims. What a cache of GPU pods keeps.
bool mayHoldGpu(const Pod& pod);

bool isTerminal(const Pod& pod);
// The phases in which a pod uses nothing (Succeeded, Failed).
inline constexpr PodPhase kTerminalPodPhases[] = {PodPhase::Succeeded, PodPhase::Failed};
std::string_view toString(PodPhase phase);

// Where the launcher rule reads VMIs and attached devices from. A scan of a
// Cluster, LauncherIndex and the incremental UsageIndex each implement it; the
// rule itself (launchOf) is written once.
class LaunchFacts {
 public:
  virtual ~LaunchFacts() = default;
  // Calls `visit` for VMIs whose status.activePods may list the pod's uid (a
  // superset is fine: the rule checks).
  virtual void forEachVmiListing(const Pod& pod,
                                 const std::function<void(const VirtualMachineInstance&)>& visit) const = 0;
  // Calls `visit` for devices that may be attached to the VMI (a superset is
  // fine), in a deterministic order (by namespace/name).
  virtual void forEachDeviceOf(const VirtualMachineInstance& vmi,
                               const std::function<void(const GpuDevice&)>& visit) const = 0;
};

// A pod is a VMI's launcher and which devices cover it.
struct Launch {
  const VirtualMachineInstance* vmi = nullptr;
  std::vector<const GpuDevice*> devices;  // attachableTo(vmi), by namespace/name
};

// The launcher rule: a pod is the launcher of a VMI only when that VMI, in the
// pod's own namespace, lists the pod's uid in status.activePods (owner references
// and labels prove nothing; a pod without a uid launches nothing). A pod that two
// or more VMIs list launches none of them: KubeVirt lists a pod once, so a second
// listing is stale or forged, and picking one would let whichever status was
// written last choose which devices hide the pod's GPUs; its GPUs count as raw
// usage until one VMI remains. Devices are matched to the VMI by uid only.
Launch launchOf(const Pod& pod, const LaunchFacts& facts);

// LaunchFacts read by scanning a Cluster (per namespace): for one-off decisions.
class ClusterLaunchFacts final : public LaunchFacts {
 public:
  explicit ClusterLaunchFacts(const Cluster& cluster) : cluster_(&cluster) {}
  void forEachVmiListing(const Pod& pod,
                         const std::function<void(const VirtualMachineInstance&)>& visit) const override;
  void forEachDeviceOf(const VirtualMachineInstance& vmi,
                       const std::function<void(const GpuDevice&)>& visit) const override;

 private:
  const Cluster* cluster_;
};

// LaunchFacts indexed once over a whole Cluster: for recomputing every pod.
class LauncherIndex final : public LaunchFacts {
 public:
  explicit LauncherIndex(const Cluster& cluster);
  void forEachVmiListing(const Pod& pod,
                         const std::function<void(const VirtualMachineInstance&)>& visit) const override;
  void forEachDeviceOf(const VirtualMachineInstance& vmi,
                       const std::function<void(const GpuDevice&)>& visit) const override;

 private:
  std::multimap<std::string, const VirtualMachineInstance*> byPodUid_;
  std::multimap<std::string, const GpuDevice*> devicesByVmiUid_;
};

// A device covers a VMI's launcher only when attached to that VMI (by uid), in
// the VMI's own namespace, and not released. Devices of another namespace never do.
bool attachableTo(const GpuDevice& d, const VirtualMachineInstance& vmi);

// Coverage for budgets: every device attached to the VMI covers its launcher,
// because a Lost device still counts itself against the budget.
std::int64_t budgetCoverage(const std::vector<const GpuDevice*>& attached, const Cluster& cluster,
                            std::string_view resource);
// Coverage for node capacity: only devices holding units on the pod's node.
std::int64_t capacityCoverage(const std::vector<const GpuDevice*>& attached, const Cluster& cluster,
                              std::string_view resource, std::string_view node);

// What one pod contributes, after coverage. Terminal pods contribute nothing.
struct PodUsage {
  std::string node;       // where the capacity usage lands ("" when unbound)
  ResourceList capacity;  // raw-name units on the node, by resource name
  ResourceList budget;    // by quota key, charged to the pod's namespace
  bool isLauncher = false;
  friend bool operator==(const PodUsage&, const PodUsage&) = default;
};
PodUsage podUsage(const Pod& pod, const Launch& launch, const Cluster& cluster);

// What one held device contributes.
struct DeviceUsage {
  std::string node;       // node whose units it holds ("" when none)
  ResourceList capacity;  // by resource name
  ResourceList budget;    // by quota key, charged to the device's namespace
  friend bool operator==(const DeviceUsage&, const DeviceUsage&) = default;
};
DeviceUsage deviceUsage(const GpuDevice& device, const Cluster& cluster);

// Budget keys a resource name is charged under.
std::string budgetKeyFor(std::string_view resource);

// Usage of the whole cluster, recomputed from scratch. The incremental index
// must always equal this.
struct UsageTotals {
  // node -> resource name -> units in use (held devices + raw pods)
  std::map<std::string, ResourceList> nodeUsed;
  // node -> resource name -> units held by devices only
  std::map<std::string, ResourceList> nodeHeld;
  // namespace -> quota key -> usage charged directly to the namespace
  std::map<std::string, ResourceList> namespaceUsed;
  // namespace -> resource name -> units occupied on nodes by the namespace
  std::map<std::string, ResourceList> namespacePlaced;
  friend bool operator==(const UsageTotals&, const UsageTotals&) = default;
};
UsageTotals computeUsage(const Cluster& cluster);

}  // namespace tally::model
