#include "tally/model/usage.hpp"

#include <algorithm>

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
      if (isGpuResourceName(name) && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
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

bool isTerminal(const Pod& pod) { return pod.phase == PodPhase::Succeeded || pod.phase == PodPhase::Failed; }

LauncherIndex::LauncherIndex(const Cluster& cluster) : cluster_(&cluster) {
  for (const auto& [key, vmi] : cluster.vmis) {
    for (const auto& [podUid, node] : vmi.activePods) byPodUid_[podUid] = &vmi;
  }
  for (const auto& [key, d] : cluster.devices) {
    if (d.attachedTo.uid.empty()) continue;
    auto vmi = cluster.vmis.find(objectKey(d.ns, d.attachedTo.name));
    if (vmi != cluster.vmis.end() && attachableTo(d, vmi->second)) devicesByVmiUid_[d.attachedTo.uid].push_back(&d);
  }
}

const VirtualMachineInstance* LauncherIndex::launcherOf(const Pod& pod) const {
  auto it = byPodUid_.find(pod.uid);
  if (it == byPodUid_.end() || pod.uid.empty()) return nullptr;
  // A VMI only launches pods of its own namespace.
  return it->second->ns == pod.ns ? it->second : nullptr;
}

const std::vector<const GpuDevice*>& LauncherIndex::attachedDevices(const VirtualMachineInstance& vmi) const {
  auto it = devicesByVmiUid_.find(vmi.uid);
  return it == devicesByVmiUid_.end() ? kNoDevices : it->second;
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

PodUsage podUsage(const Pod& pod, const VirtualMachineInstance* launcherOf,
                  const std::vector<const GpuDevice*>& attached, const Cluster& cluster) {
  PodUsage out;
  if (isTerminal(pod)) return out;
  out.node = pod.nodeName;
  out.isLauncher = launcherOf != nullptr;
  const auto& devices = launcherOf ? attached : kNoDevices;
  for (const auto& [resource, amount] : effectiveRequests(pod)) {
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
    const VirtualMachineInstance* vmi = launchers.launcherOf(pod);
    PodUsage u = podUsage(pod, vmi, vmi ? launchers.attachedDevices(*vmi) : kNoDevices, cluster);
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
  return totals;
}

}  // namespace tally::model
