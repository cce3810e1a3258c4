#include "tally/model/usage.hpp"

#include <algorithm>

#include "lookup.hpp"
#include "tally/model/dra.hpp"

namespace tally::model {

namespace {

const std::vector<const GpuDevice*> kNoDevices;

const DeviceClass* classOf(const Cluster& cluster, const GpuDevice& d) {
  auto it = cluster.classes.find(d.className);
  return it == cluster.classes.end() ? nullptr : &it->second;
}

}  // namespace

std::int64_t effectiveRequest(const Pod& pod, std::string_view resource) {
  std::int64_t apps = 0;
  for (const auto& c : pod.containers) apps += c.get(resource);
  std::int64_t sidecars = 0;
  std::int64_t initPeak = 0;
  for (const auto& init : pod.initContainers) {
    std::int64_t r = init.requests.get(resource);
    if (init.restartable) {
      sidecars += r;
      initPeak = std::max(initPeak, sidecars);
    } else {
      initPeak = std::max(initPeak, sidecars + r);
    }
  }
  return std::max(apps + sidecars, initPeak) + pod.overhead.get(resource);
}

ResourceList effectiveRequests(const Pod& pod) {
  std::vector<std::string_view> names;
  auto note = [&](const ResourceList& l) {
    for (const auto& [name, amount] : l) {
      if (isExtendedResourceName(name) && std::find(names.begin(), names.end(), name) == names.end())
        names.push_back(name);
    }
  };
  for (const auto& c : pod.containers) note(c);
  for (const auto& c : pod.initContainers) note(c.requests);
  note(pod.overhead);
  ResourceList out;
  for (std::string_view name : names) {
    std::int64_t amount = effectiveRequest(pod, name);
    if (amount != 0) out.set(name, amount);
  }
  return out;
}

bool isGpuResource(const Cluster& cluster, std::string_view resource) {
  if (isGpuVendorResourceName(resource)) return true;
  return std::any_of(cluster.classes.begin(), cluster.classes.end(),
                     [&](const auto& entry) { return entry.second.resourceName == resource; });
}

ResourceList gpuRequests(const Cluster& cluster, const Pod& pod) {
  ResourceList out;
  for (const auto& [name, amount] : effectiveRequests(pod)) {
    if (isGpuResource(cluster, name)) out.set(name, amount);
  }
  return out;
}

bool mayHoldGpu(const Pod& pod) { return pod.hasResourceClaims || !effectiveRequests(pod).empty(); }

bool isTerminal(const Pod& pod) {
  return std::find(std::begin(kTerminalPodPhases), std::end(kTerminalPodPhases), pod.phase) !=
         std::end(kTerminalPodPhases);
}

std::string_view toString(PodPhase phase) {
  switch (phase) {
    case PodPhase::Pending: return "Pending";
    case PodPhase::Running: return "Running";
    case PodPhase::Succeeded: return "Succeeded";
    case PodPhase::Failed: return "Failed";
    case PodPhase::Unknown: return "Unknown";
  }
  return "Unknown";
}

Launch launchOf(const Pod& pod, const LaunchFacts& facts) {
  Launch out;
  if (pod.uid.empty()) return out;
  const VirtualMachineInstance* listed = nullptr;
  bool twice = false;
  facts.forEachVmiListing(pod, [&](const VirtualMachineInstance& vmi) {
    if (vmi.ns != pod.ns || !vmi.activePods.contains(pod.uid) || &vmi == listed) return;
    if (listed) twice = true;
    listed = &vmi;
  });
  if (!listed || twice) return out;
  out.vmi = listed;
  facts.forEachDeviceOf(*listed, [&](const GpuDevice& d) {
    if (attachableTo(d, *listed)) out.devices.push_back(&d);
  });
  return out;
}

void ClusterLaunchFacts::forEachVmiListing(const Pod& pod,
                                           const std::function<void(const VirtualMachineInstance&)>& visit) const {
  auto [first, last] = detail::namespacedRange(cluster_->vmis, pod.ns);
  for (auto it = first; it != last; ++it) visit(it->second);
}

void ClusterLaunchFacts::forEachDeviceOf(const VirtualMachineInstance& vmi,
                                         const std::function<void(const GpuDevice&)>& visit) const {
  auto [first, last] = detail::namespacedRange(cluster_->devices, vmi.ns);
  for (auto it = first; it != last; ++it) visit(it->second);
}

LauncherIndex::LauncherIndex(const Cluster& cluster) {
  for (const auto& [key, vmi] : cluster.vmis) {
    for (const auto& [podUid, node] : vmi.activePods) byPodUid_.emplace(podUid, &vmi);
  }
  // By uid only: the name in attachedTo may be stale (a VMI recreated under the same name).
  for (const auto& [key, d] : cluster.devices) {
    if (!d.attachedTo.uid.empty()) devicesByVmiUid_.emplace(d.attachedTo.uid, &d);
  }
}

void LauncherIndex::forEachVmiListing(const Pod& pod,
                                      const std::function<void(const VirtualMachineInstance&)>& visit) const {
  auto [first, last] = byPodUid_.equal_range(pod.uid);
  for (auto it = first; it != last; ++it) visit(*it->second);
}

void LauncherIndex::forEachDeviceOf(const VirtualMachineInstance& vmi,
                                    const std::function<void(const GpuDevice&)>& visit) const {
  auto [first, last] = devicesByVmiUid_.equal_range(vmi.uid);
  for (auto it = first; it != last; ++it) visit(*it->second);
}

bool attachableTo(const GpuDevice& d, const VirtualMachineInstance& vmi) {
  return d.attachedTo.uid == vmi.uid && d.ns == vmi.ns && countsAgainstBudget(d);
}

std::int64_t budgetCoverage(const std::vector<const GpuDevice*>& attached, const Cluster& cluster,
                            std::string_view resource) {
  std::int64_t covered = 0;
  for (const GpuDevice* d : attached) {
    const DeviceClass* cls = classOf(cluster, *d);
    if (cls && cls->resourceName == resource && countsAgainstBudget(*d)) covered += d->count;
  }
  return covered;
}

std::int64_t capacityCoverage(const std::vector<const GpuDevice*>& attached, const Cluster& cluster,
                              std::string_view resource, std::string_view node) {
  std::int64_t covered = 0;
  for (const GpuDevice* d : attached) {
    const DeviceClass* cls = classOf(cluster, *d);
    if (cls && cls->resourceName == resource && holdsNodeUnits(*d) && d->node == node) covered += d->count;
  }
  return covered;
}

std::string budgetKeyFor(std::string_view resource) { return quotaKey(resource); }

PodUsage podUsage(const Pod& pod, const Launch& launch, const Cluster& cluster) {
  PodUsage out;
  if (isTerminal(pod)) return out;
  out.node = pod.nodeName;
  out.isLauncher = launch.vmi != nullptr;
  const auto& devices = launch.vmi ? launch.devices : kNoDevices;
  for (const auto& [resource, amount] : gpuRequests(cluster, pod)) {
    std::int64_t forBudget = std::max<std::int64_t>(0, amount - budgetCoverage(devices, cluster, resource));
    if (forBudget > 0) out.budget.add(budgetKeyFor(resource), forBudget);
    if (!pod.nodeName.empty()) {
      std::int64_t forNode =
          std::max<std::int64_t>(0, amount - capacityCoverage(devices, cluster, resource, pod.nodeName));
      if (forNode > 0) out.capacity.add(resource, forNode);
    }
  }
  return out;
}

DeviceUsage deviceUsage(const GpuDevice& device, const Cluster& cluster) {
  DeviceUsage out;
  const DeviceClass* cls = classOf(cluster, device);
  if (!cls) return out;
  if (countsAgainstBudget(device)) out.budget.add(budgetKeyFor(cls->resourceName), device.count);
  if (holdsNodeUnits(device)) {
    out.node = device.node;
    out.capacity.add(cls->resourceName, device.count);
  }
  return out;
}

UsageTotals computeUsage(const Cluster& cluster) {
  UsageTotals totals;
  LauncherIndex launchers(cluster);
  for (const auto& [key, pod] : cluster.pods) {
    PodUsage u = podUsage(pod, launchOf(pod, launchers), cluster);
    if (!u.node.empty()) {
      for (const auto& [r, a] : u.capacity) {
        totals.nodeUsed[u.node].add(r, a);
        totals.namespacePlaced[pod.ns].add(r, a);
      }
    }
    for (const auto& [k, a] : u.budget) totals.namespaceUsed[pod.ns].add(k, a);
  }
  for (const auto& [key, d] : cluster.devices) {
    DeviceUsage u = deviceUsage(d, cluster);
    if (!u.node.empty()) {
      for (const auto& [r, a] : u.capacity) {
        totals.nodeUsed[u.node].add(r, a);
        totals.nodeHeld[u.node].add(r, a);
        totals.namespacePlaced[d.ns].add(r, a);
      }
    }
    for (const auto& [k, a] : u.budget) totals.namespaceUsed[d.ns].add(k, a);
  }
  for (const auto& [key, claim] : cluster.resourceClaims) {
    ClaimUsage u = claimUsage(cluster, claim);
    for (const auto& [r, a] : u.capacity) {
      totals.nodeUsed[u.node].add(r, a);
      totals.namespacePlaced[claim.ns].add(r, a);
    }
    for (const auto& [k, a] : u.budget) totals.namespaceUsed[claim.ns].add(k, a);
  }
  return totals;
}

}  // namespace tally::model
