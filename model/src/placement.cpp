#include "tally/model/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "lookup.hpp"
#include "without_devices.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

using detail::chainOf;
using detail::findClass;

HeldAheadView::HeldAheadView(const Cluster& cluster, const CapacityView& base) : cluster_(cluster), base_(base) {}

void HeldAheadView::hold(const GpuDevice& device, std::string_view node) {
  const DeviceClass* cls = findClass(cluster_, device.className);
  if (!cls) return;
  if (!held_.emplace(objectKey(device.ns, device.name), std::string(node)).second) return;
  nodeAhead_[std::string(node)].add(cls->resourceName, device.count);
  for (const auto& ns : chainOf(cluster_, device.ns)) subtreeAhead_[ns].add(cls->resourceName, device.count);
}

const std::string* HeldAheadView::nodeOf(std::string_view ns, std::string_view name) const {
  auto it = held_.find(objectKey(ns, name));
  return it == held_.end() ? nullptr : &it->second;
}

namespace {
std::int64_t ahead(const std::map<std::string, ResourceList, std::less<>>& m, std::string_view key,
                   std::string_view resource) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second.get(resource);
}
}  // namespace

std::int64_t HeldAheadView::nodeUsed(std::string_view node, std::string_view resource) const {
  return base_.nodeUsed(node, resource) + ahead(nodeAhead_, node, resource);
}
std::int64_t HeldAheadView::nodeHeld(std::string_view node, std::string_view resource) const {
  return base_.nodeHeld(node, resource) + ahead(nodeAhead_, node, resource);
}
// A held-ahead device is Pending in the cluster, so its budget is counted already.
std::int64_t HeldAheadView::subtreeUsed(std::string_view ns, std::string_view key) const {
  return base_.subtreeUsed(ns, key);
}
std::int64_t HeldAheadView::namespaceUsed(std::string_view ns, std::string_view key) const {
  return base_.namespaceUsed(ns, key);
}
bool HeldAheadView::counts(const Pod& pod) const { return base_.counts(pod); }
std::int64_t HeldAheadView::subtreePlaced(std::string_view ns, std::string_view resource) const {
  return base_.subtreePlaced(ns, resource) + ahead(subtreeAhead_, ns, resource);
}

std::int64_t HeldAheadView::poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const {
  std::int64_t free = base_.poolFreeUnits(cluster, pool);
  for (const auto& [nodeName, units] : nodeAhead_) {
    std::int64_t extra = units.get(pool.resourceName);
    auto node = cluster.nodes.find(nodeName);
    if (extra == 0 || node == cluster.nodes.end()) continue;
    if (classServing(cluster, node->second, pool.resourceName) != &pool) continue;
    const std::int64_t served = unitsServed(node->second, pool).units;
    const std::int64_t used = base_.nodeUsed(nodeName, pool.resourceName);
    free -= std::max<std::int64_t>(0, served - used) - std::max<std::int64_t>(0, served - used - extra);
  }
  return free;
}

namespace {

using detail::WithoutDevices;

auto arrival(const GpuDevice& d) { return std::tie(d.created, d.ns, d.name); }

}  // namespace

Placement placeHeldDevice(const Cluster& cluster, const HeldAheadView& view, const GpuDevice& device) {
  return placeHeldSet(cluster, view, DeviceSet{{&device}, {}, {}});
}

DeviceSet deviceSetOf(const Cluster& cluster, const GpuDevice& device) {
  // An attachment the VM door wrote names the whole set, before its VMI exists.
  if (!device.attachSet.empty()) {
    DeviceSet set;
    set.vmi = objectKey(device.attachedTo.ns.empty() ? device.ns : device.attachedTo.ns, device.attachedTo.name);
    for (const auto& name : device.attachSet) {
      if (name == device.name) {
        set.members.push_back(&device);
      } else if (auto member = cluster.devices.find(objectKey(device.ns, name)); member != cluster.devices.end()) {
        set.members.push_back(&member->second);
      } else {
        set.missing.push_back(name);
      }
    }
    return set;
  }
  auto [first, last] = detail::namespacedRange(cluster.vmis, device.ns);
  for (auto it = first; it != last; ++it) {
    const auto& names = it->second.heldDevices;
    if (std::find(names.begin(), names.end(), device.name) == names.end()) continue;
    DeviceSet set;
    set.vmi = it->first;
    for (const auto& name : names) {
      if (name == device.name) {
        set.members.push_back(&device);
        continue;
      }
      auto member = cluster.devices.find(objectKey(device.ns, name));
      if (member != cluster.devices.end()) {
        set.members.push_back(&member->second);
      } else {
        set.missing.push_back(name);
      }
    }
    return set;
  }
  return DeviceSet{{&device}, {}, {}};
}

Placement placeHeldSet(const Cluster& cluster, const HeldAheadView& view, const DeviceSet& deviceSet) {
  Placement p;
  const std::vector<const GpuDevice*>& set = deviceSet.members;
  if (!deviceSet.missing.empty()) {
    std::string names;
    for (const auto& n : deviceSet.missing) names += (names.empty() ? "" : ", ") + n;
    p.decision.refuse(Code::DeviceUnknown,
                      fmt::format("vmi/{} names GPUDevice(s) {} in its set, which do not exist (yet); the set is "
                                  "placed once all of it is ordered",
                                  deviceSet.vmi, names));
    return p;
  }
  std::optional<std::string> pinned;
  std::vector<const GpuDevice*> pending;
  for (const GpuDevice* m : set) {
    std::string node;
    if (holdsNodeUnits(*m)) {
      node = m->node;
    } else if (const std::string* ahead = view.nodeOf(m->ns, m->name)) {
      node = *ahead;
    }
    if (!node.empty()) {
      if (pinned && *pinned != node) {
        p.decision.refuse(Code::DeviceUnavailable,
                          fmt::format("the device set of gpudevice/{}/{} is already split across nodes {} and {}; "
                                      "one node must hold the whole set",
                                      m->ns, m->name, *pinned, node));
        return p;
      }
      pinned = node;
    } else if (m->phase == DevicePhase::Pending) {
      pending.push_back(m);
    }
  }
  if (pending.empty()) {
    p.node = pinned;
    return p;
  }
  const GpuDevice* earliest = *std::min_element(
      pending.begin(), pending.end(), [](const GpuDevice* a, const GpuDevice* b) { return arrival(*a) < arrival(*b); });
  auto inSet = [&](const GpuDevice& d) {
    return std::any_of(set.begin(), set.end(), [&](const GpuDevice* m) { return m->ns == d.ns && m->name == d.name; });
  };
  WithoutDevices budgets(cluster, view);
  DeviceOrder order;
  order.ns = earliest->ns;
  order.subject = fmt::format("gpudevice/{}/{}", pending.front()->ns, pending.front()->name);
  if (set.size() > 1) order.subject += fmt::format(" (set of {})", set.size());
  for (const GpuDevice* m : pending) {
    budgets.leaveOut(*m);
    order.items.push_back(DeviceTemplate{m->className, m->count});
  }
  for (const auto& [key, other] : cluster.devices) {
    if (other.phase != DevicePhase::Pending || view.holds(other.ns, other.name) || inSet(other)) continue;
    if (arrival(*earliest) < arrival(other)) budgets.leaveOut(other);
  }
  if (!pinned) return placeDeviceSet(cluster, budgets, order);
  p.decision = checkDeviceOrder(cluster, budgets, order);
  if (!p.decision.allowed()) return p;
  auto node = cluster.nodes.find(*pinned);
  if (node == cluster.nodes.end()) {
    p.decision.refuse(Code::NodeGone,
                      fmt::format("{}: its set is held on node {}, which is gone", order.subject, *pinned));
    return p;
  }
  std::map<std::string, std::int64_t> demand;
  for (const GpuDevice* m : pending) demand[m->className] += m->count;
  for (const auto& [className, units] : demand) {
    const DeviceClass* cls = findClass(cluster, className);
    const std::int64_t free = cls ? freeUnits(node->second, *cls, budgets) : 0;
    if (free < units) {
      p.decision.refuse(Code::NodeInsufficient,
                        fmt::format("{}: its set is held on node {}, which has {} free unit(s) of class {}; its "
                                    "Pending devices need {}",
                                    order.subject, *pinned, free, className, units));
    }
  }
  if (p.decision.allowed()) p.node = pinned;
  return p;
}

namespace {

// Units the node's devices give the class in its node mode, Ready or not,
// cordoned or not.
std::int64_t advertisedUnits(const Node& node, const DeviceClass& cls) {
  Node asIfEligible = node;
  asIfEligible.ready = true;
  asIfEligible.unschedulable = false;
  return unitsServed(asIfEligible, cls).units;
}

}  // namespace

std::optional<Refusal> holdLost(const Cluster& cluster, const GpuDevice& device) {
  if (!holdsNodeUnits(device)) return std::nullopt;
  const std::string subject = fmt::format("GPUDevice {}/{}", device.ns, device.name);
  auto node = cluster.nodes.find(device.node);
  if (node == cluster.nodes.end()) {
    return Refusal{Code::NodeGone, fmt::format("{}: node {} holding its {} GPU(s) of class {} is gone", subject,
                                               device.node, device.count, device.className)};
  }
  const DeviceClass* cls = findClass(cluster, device.className);
  if (!cls) return std::nullopt;  // an unknown class decides nothing here (the order's checks refuse it)
  const std::int64_t advertised = advertisedUnits(node->second, *cls);
  // The node's holders of this class, in arrival order: the last ones lose first.
  std::vector<const GpuDevice*> holders;
  for (const auto& [key, other] : cluster.devices) {
    if (holdsNodeUnits(other) && other.node == device.node && other.className == device.className) {
      holders.push_back(&other);
    }
  }
  std::sort(holders.begin(), holders.end(),
            [](const GpuDevice* a, const GpuDevice* b) { return arrival(*a) < arrival(*b); });
  std::int64_t before = 0;
  for (const GpuDevice* h : holders) {
    if (h->ns == device.ns && h->name == device.name) break;
    before += h->count;
  }
  if (before + device.count <= advertised) return std::nullopt;
  return Refusal{Code::DeviceUnavailable,
                 fmt::format("{}: node {} now advertises {} unit(s) of class {}; the devices placed before it hold {} "
                             "and it holds {}",
                             subject, device.node, advertised, device.className, before, device.count)};
}

Decision checkRecovery(const Cluster& cluster, const CapacityView& view, const GpuDevice& device) {
  Decision d;
  const std::string subject = fmt::format("GPUDevice {}/{}", device.ns, device.name);
  const DeviceClass* cls = findClass(cluster, device.className);
  auto node = cluster.nodes.find(device.node);
  if (device.node.empty() || node == cluster.nodes.end()) {
    d.refuse(Code::NodeGone, fmt::format("{}: node {} is still gone", subject, device.node));
    return d;
  }
  if (!cls) {
    d.refuse(Code::ClassUnknown, fmt::format("{} names GPU class {}, which does not exist", subject, device.className));
    return d;
  }
  if (auto why = nodeIneligibility(node->second, *cls)) {
    d.refusals.push_back(*why);
    return d;
  }
  const std::int64_t free = freeUnits(node->second, *cls, view);
  if (free < device.count) {
    d.refuse(Code::NodeInsufficient,
             fmt::format("{}: node {} is back with {} free unit(s) of class {}; the device holds {}", subject,
                         device.node, free, device.className, device.count));
  }
  return d;
}

}  // namespace tally::model
