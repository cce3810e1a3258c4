// GPUDevice orders: an order checked against its class, pool, budget and
// gate; a VMI's device set placed whole on one node; a device's deletion.

#include "tally/model/admission.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>
#include <utility>

#include "filter_core.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/vmi.hpp"
#include "lookup.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/quota.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

using detail::findClass;
using detail::namespacedRange;

Decision checkDeviceOrder(const Cluster& cluster, const CapacityView& view, const DeviceOrder& order) {
  Decision d;
  for (Kind kind : {Kind::Node, Kind::DeviceClass, Kind::GpuDevice, Kind::Pod}) {
    if (!cluster.synced(kind)) {
      d.refuse(Code::CacheNotSynced,
               fmt::format("{} refused: the {} cache is not synced yet", order.subject, toString(kind)));
      return d;
    }
  }
  std::map<std::string, std::int64_t> demand;
  for (const auto& item : order.items) {
    if (item.count < 1) {
      d.refuse(Code::CountInvalid, fmt::format("{} asks for {} GPU(s) of class {}; the count must be at least 1",
                                               order.subject, item.count, item.className));
      continue;
    }
    demand[item.className] += item.count;
  }
  const Organization* org = organizationOf(cluster, order.ns);
  if (auto why = unattributedNamespace(cluster, order.ns)) {
    d.refuse(Code::NamespaceUnorganized, fmt::format("{} refused: {}", order.subject, *why));
  }
  std::vector<const DeviceClass*> classes;
  ResourceList budgetDemand;  // classes sharing a quota key are checked together
  for (const auto& [name, count] : demand) {
    const DeviceClass* cls = findClass(cluster, name);
    if (!cls) {
      d.refuse(Code::ClassUnknown, fmt::format("{} names GPU class {}, which does not exist", order.subject, name));
      continue;
    }
    classes.push_back(cls);
    if (cls->deleting) {
      d.refuse(Code::ClassDeleting, fmt::format("GPU class {} is being deleted and accepts no new orders", name));
      continue;
    }
    // kube-scheduler's DRA allocator cannot see a unit a GPUDevice holds: a
    // held device of a DRA pool could be allocated to a claim too.
    if (cls->dra) {
      d.refuse(
          Code::NotPermitted,
          fmt::format("GPU class {} is served by DRA driver {}: {} cannot hold its devices; ask for them with a "
                      "ResourceClaim of DeviceClass {}",
                      name, cls->dra->driver, order.subject,
                      cls->dra->deviceClassName.empty() ? std::string("(none named)") : cls->dra->deviceClassName));
      continue;
    }
    if (count > cls->maxCount) {
      d.refuse(Code::CountAboveMax,
               fmt::format("{} asks for {} GPU(s) of class {}; one order may take at most {} (maxCount)", order.subject,
                           count, name, cls->maxCount));
    }
    if (!cls->gateOpen) d.refuse(Code::GateClosed, gateClosedMessage(*cls));
    if (auto why = notEntitled(cluster, order.ns, *cls)) d.refuse(Code::NotEntitled, *why);
    // A GPUDevice of count N holds N units of its class (see deviceUsage).
    std::int64_t units = count;
    budgetDemand.add(quotaKey(cls->resourceName), units);
    std::int64_t free = view.poolFreeUnits(cluster, *cls);
    std::int64_t idle = idleReservedByOthers(cluster, view, *cls, org);
    if (free < units) {
      d.refuse(Code::PoolInsufficient,
               fmt::format("pool {} has {} free unit(s); {} asks for {}", name, free, order.subject, units));
    } else if (free - idle < units) {
      d.refuse(Code::ReservedForOthers,
               fmt::format("pool {} has {} free unit(s) but {} back idle reservations of other organizations; {} asks "
                           "for {}",
                           name, free, idle, order.subject, units));
    }
  }
  for (const auto& [key, units] : budgetDemand) {
    if (auto refusal = checkBudget(cluster, view, order.ns, BudgetAsk{key, units, 0})) d.refusals.push_back(*refusal);
  }
  if (!d.allowed() || classes.empty()) return d;
  bool oneNode = false;
  std::int64_t bestFree = 0;
  // Classes of one resource name draw on the same units of a node.
  ResourceList perResource;
  for (const DeviceClass* cls : classes) perResource.add(cls->resourceName, demand[cls->name]);
  for (const auto& [name, node] : cluster.nodes) {
    bool fits = true;
    std::int64_t nodeFree = 0;
    for (const DeviceClass* cls : classes) {
      std::int64_t free = freeUnits(node, *cls, view);
      nodeFree += free;
      if (free < perResource.get(cls->resourceName)) fits = false;
    }
    bestFree = std::max(bestFree, nodeFree);
    if (fits) {
      oneNode = true;
      break;
    }
  }
  if (!oneNode) {
    std::int64_t total = 0;
    for (const auto& [name, count] : demand) total += count;
    d.refuse(Code::NoSingleNode,
             fmt::format("no single node has {} free GPU(s) for the whole set of {}; the most free on "
                         "one node is {}",
                         total, order.subject, bestFree));
  }
  return d;
}

Placement placeDeviceSet(const Cluster& cluster, const CapacityView& view, const DeviceOrder& order) {
  auto served = [](const Node& node, const DeviceClass& cls) { return unitsServed(node, cls).units; };
  Placement p;
  p.decision = checkDeviceOrder(cluster, view, order);
  if (!p.decision.allowed()) return p;
  ResourceList perResource;
  for (const auto& item : order.items) perResource.add(findClass(cluster, item.className)->resourceName, item.count);
  struct Candidate {
    std::int64_t leftover;
    bool wholeNodeFree;
    std::string name;
  };
  std::optional<Candidate> best;
  for (const auto& [name, node] : cluster.nodes) {
    std::int64_t leftover = 0;
    bool fits = true, untouched = true;
    for (const auto& item : order.items) {
      const DeviceClass* cls = findClass(cluster, item.className);
      if (served(node, *cls) - view.nodeUsed(name, cls->resourceName) < perResource.get(cls->resourceName))
        fits = false;
    }
    for (const auto& [resource, need] : perResource) {
      std::int64_t used = view.nodeUsed(name, resource);
      const DeviceClass* cls = classServing(cluster, node, resource);
      std::int64_t total = cls ? served(node, *cls) : 0;
      leftover += std::max<std::int64_t>(0, total - used - need);
      untouched = untouched && used == 0;
    }
    if (!fits) continue;
    Candidate c{leftover, untouched, name};
    // Best fit first; among equals keep untouched nodes whole; then by name.
    if (!best ||
        std::tie(c.leftover, c.wholeNodeFree, c.name) < std::tie(best->leftover, best->wholeNodeFree, best->name)) {
      best = c;
    }
  }
  if (best) p.node = best->name;
  return p;
}

const VirtualMachineInstance* runningHolder(const Cluster& cluster, const GpuDevice& device) {
  auto running = [](const VirtualMachineInstance& v) { return v.phase != "Succeeded" && v.phase != "Failed"; };
  if (!device.attachedTo.empty()) {
    auto it = cluster.vmis.find(
        objectKey(device.attachedTo.ns.empty() ? device.ns : device.attachedTo.ns, device.attachedTo.name));
    if (it != cluster.vmis.end() && running(it->second) &&
        (device.attachedTo.uid.empty() || it->second.uid.empty() || it->second.uid == device.attachedTo.uid)) {
      return &it->second;
    }
  }
  for (const auto& [key, vmi] : cluster.vmis) {
    if (vmi.ns != device.ns || !running(vmi)) continue;
    for (const auto& held : vmi.heldDevices) {
      if (held == device.name) return &vmi;
    }
  }
  return nullptr;
}

Decision checkDeviceDeletion(const Cluster& cluster, const GpuDevice& device) {
  Decision d;
  const std::string subject = fmt::format("gpudevice/{}/{}", device.ns, device.name);
  if (!cluster.synced(Kind::VirtualMachineInstance)) {
    d.refuse(Code::CacheNotSynced,
             fmt::format("deletion of {} refused: the {} cache is not synced yet, so the VMI holding it is unknown",
                         subject, toString(Kind::VirtualMachineInstance)));
    return d;
  }
  if (const VirtualMachineInstance* vmi = runningHolder(cluster, device)) {
    d.refuse(Code::DeviceAttached,
             fmt::format("{} ({} GPU(s) of class {}) is attached to running vmi/{}/{} (phase {}); stop the VMI "
                         "before deleting the device",
                         subject, device.count, device.className, vmi->ns, vmi->name,
                         vmi->phase.empty() ? "Pending" : vmi->phase));
  }
  return d;
}

}  // namespace tally::model
