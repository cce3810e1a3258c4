#pragma once
// Usage and coverage (SPEC 3.2): what pods and held devices take, of a node's
// units and of a tenant's budget.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

// The Kubernetes effective request of a pod for one resource: the larger of the
// app containers plus restartable init containers, and each regular init
// container plus the sidecars started before it; plus overhead.
std::int64_t effectiveRequest(const Pod& pod, std::string_view resource);
// Every GPU resource name the pod requests, with its effective request.
ResourceList effectiveRequests(const Pod& pod);

bool isTerminal(const Pod& pod);

// Launcher detection: a pod is the launcher of a VMI only when that VMI lists the
// pod's UID in status.activePods. Owner references and labels prove nothing.
class LauncherIndex {
 public:
  explicit LauncherIndex(const Cluster& cluster);
  // The VMI whose launcher the pod is, or null.
  const VirtualMachineInstance* launcherOf(const Pod& pod) const;
  // Devices attached to the VMI (attachedTo.uid == vmi.uid), not Released.
  const std::vector<const GpuDevice*>& attachedDevices(const VirtualMachineInstance& vmi) const;

 private:
  std::map<std::string, const VirtualMachineInstance*> byPodUid_;
  std::map<std::string, std::vector<const GpuDevice*>> devicesByVmiUid_;
  const Cluster* cluster_;
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
  std::string node;            // where the capacity usage lands ("" when unbound)
  ResourceList capacity;       // raw-name units on the node, by resource name
  ResourceList budget;         // by quota key, charged to the pod's namespace
  bool isLauncher = false;
  friend bool operator==(const PodUsage&, const PodUsage&) = default;
};
PodUsage podUsage(const Pod& pod, const VirtualMachineInstance* launcherOf,
                  const std::vector<const GpuDevice*>& attached, const Cluster& cluster);

// What one held device contributes.
struct DeviceUsage {
  std::string node;      // node whose units it holds ("" when none)
  ResourceList capacity; // by resource name
  ResourceList budget;   // by quota key, charged to the device's namespace
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
