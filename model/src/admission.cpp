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

namespace {

std::string joined(const std::vector<std::string>& items, std::size_t limit = 10) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > limit) out += fmt::format(" and {} more", items.size() - limit);
  return out;
}

std::int64_t poolAvailableFor(const Cluster& cluster, const CapacityView& view, const DeviceClass& cls,
                              const Organization* org) {
  return view.poolFreeUnits(cluster, cls) - idleReservedByOthers(cluster, view, cls, org);
}

bool inSubtree(const Cluster& cluster, std::string_view ns, std::string_view root) {
  for (const auto& a : detail::chainOf(cluster, ns)) {
    if (a == root) return true;
  }
  return false;
}

// An add-on increase is a new grant: refused in a pool closed by a failed audit,
// and when the pool's equation would break (or become unknown) with it.
void checkIncrease(const Cluster& cluster, const Organization& before, const Organization& after,
                   const std::string& key, std::int64_t delta, Decision& d) {
  std::optional<Cluster> next;
  for (const auto& [name, cls] : cluster.classes) {
    if (quotaKey(cls.resourceName) != key) continue;
    // The gate as this binary's doors apply it: published by the auditor, or
    // evaluated here when none runs; undecided is closed (fail closed).
    const GateState gate = doorGate(cluster, cls);
    if (gate.failed()) {
      d.refuse(Code::GateClosed,
               fmt::format("organization {}: the change grants {} more {}, but pool {} is closed by a failed audit "
                           "({}): {}; no new grants until the failure is cleared and acknowledged",
                           after.name, delta, key, cls.name, gate.failureId, gate.reason));
      continue;
    }
    if (gate.undecided) {
      d.refuse(Code::GateClosed, fmt::format("organization {}: the change grants {} more {}, but {}", after.name, delta,
                                             key, gate.reason));
      continue;
    }
    // A transaction freezing creation admits only its own grant (the seed's step 4).
    if (auto refused = grantDuringTransaction(cluster, before, after, cls)) {
      d.refusals.push_back(std::move(*refused));
      continue;
    }
    if (!next) next = withOrganization(cluster, after);
    PoolInvariant was = evaluateInvariant(cluster, cls);
    PoolInvariant will = evaluateInvariant(*next, cls);
    if (!will.unknown.empty()) {
      d.refuse(Code::InvariantUnknown, fmt::format("organization {}: the change grants {} more {}, but {}", after.name,
                                                   delta, key, will.equation()));
    } else if (!will.holds() && will.headroom < was.headroom) {
      d.refuse(Code::InvariantBroken, fmt::format("organization {}: the change grants {} more {}, which breaks {}",
                                                  after.name, delta, key, will.equation()));
    }
  }
}

// A reservation add-on backs the organization's pending and active records
// naming it: lowering its grant below what they reserve would leave a record
// (and its billing window) open without the entitlement behind it. The
// runbook's release comes first: the record goes to releasing (or, still
// pending, to canceled) in the ledger, then the add-on is removed.
void checkReservationRemoval(const Cluster& cluster, const Organization& before, const Organization& after,
                             Decision& d) {
  auto grantedDevices = [&](const Organization& org, const std::string& id, const Addon& addon) {
    std::int64_t devices = 0;
    for (const auto& a : org.addons) {
      if (a.addonId == id) devices += a.quantity * addon.gpu.begin()->second.devices;
    }
    return devices;
  };
  std::set<std::string> ids;
  for (const auto& a : before.addons) ids.insert(a.addonId);
  for (const auto& id : ids) {
    if (!cluster.plans) continue;
    auto found = cluster.plans->addons.find(id);
    if (found == cluster.plans->addons.end()) continue;
    const Addon& addon = found->second;
    auto profile = reservationProfile(addon);
    if (!profile) continue;
    const std::int64_t was = grantedDevices(before, id, addon);
    const std::int64_t will = grantedDevices(after, id, addon);
    if (will >= was) continue;
    if (!cluster.synced(Kind::Ledger)) {
      d.refuse(Code::CacheNotSynced,
               fmt::format("organization {}: the change lowers reservation add-on {} from {} to {} device(s) of {}, "
                           "but the reservation ledger is not read yet, so the records it backs are unknown",
                           after.name, id, was, will, *profile));
      continue;
    }
    std::int64_t reserved = 0;
    std::vector<std::string> held;
    for (const auto& r : cluster.ledger.records) {
      if (r.organization != after.name || r.addonId != id) continue;
      if (r.state != ReservationState::Pending && r.state != ReservationState::Active) continue;
      reserved += r.devices;
      held.push_back(fmt::format("{} ({}, {} device(s))", r.id, toString(r.state), r.devices));
    }
    if (will >= reserved) continue;
    d.refuse(Code::AddonReductionBlocked,
             fmt::format("organization {}: the change lowers reservation add-on {} from {} to {} device(s) of {}, "
                         "but ledger record(s) {} reserve {}; release first: set an active record's state to "
                         "releasing (a pending one's to canceled) in the ledger, wait until its holders are gone, "
                         "then remove the add-on",
                         after.name, id, was, will, *profile, joined(held), reserved));
  }
}

}  // namespace

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
    if (count > cls->maxCount) {
      d.refuse(Code::CountAboveMax,
               fmt::format("{} asks for {} GPU(s) of class {}; one order may take at most {} (maxCount)", order.subject,
                           count, name, cls->maxCount));
    }
    if (!cls->gateOpen) d.refuse(Code::GateClosed, gateClosedMessage(*cls));
    if (cls->requiresEntitlement && !entitled(cluster, order.ns, name)) {
      d.refuse(Code::NotEntitled,
               fmt::format("namespace {} is not entitled to licensed class {} (label {}{}=\"true\" on it "
                           "or an ancestor)",
                           order.ns, name, kEntitlementLabelPrefix, name));
    }
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

std::vector<std::string> holdersOf(const Cluster& cluster, std::string_view orgNamespace, std::string_view key) {
  std::vector<std::string> holders;
  ClusterLaunchFacts facts(cluster);
  for (const auto& [k, pod] : cluster.pods) {
    if (!inSubtree(cluster, pod.ns, orgNamespace)) continue;
    PodUsage u = podUsage(pod, launchOf(pod, facts), cluster);
    if (std::int64_t n = u.budget.get(key)) holders.push_back(fmt::format("pod/{}: {}", k, n));
  }
  for (const auto& [k, d] : cluster.devices) {
    if (!inSubtree(cluster, d.ns, orgNamespace)) continue;
    DeviceUsage u = deviceUsage(d, cluster);
    if (std::int64_t n = u.budget.get(key)) {
      std::string vmi =
          d.attachedTo.empty() ? "" : fmt::format(" (attached to vmi/{}/{})", d.attachedTo.ns, d.attachedTo.name);
      holders.push_back(fmt::format("gpudevice/{}: {}{}", k, n, vmi));
    }
  }
  return holders;
}

Decision checkAddonChange(const Cluster& cluster, const CapacityView& view, const Organization& before,
                          const Organization& after) {
  Decision d;
  for (const auto& a : after.addons) {
    bool known = cluster.plans && cluster.plans->addons.contains(a.addonId);
    bool unchanged = std::any_of(before.addons.begin(), before.addons.end(), [&](const AddonAssignment& b) {
      return b.addonId == a.addonId && b.quantity == a.quantity;
    });
    if (!known && !unchanged) {
      d.refuse(Code::AddonUnknown,
               fmt::format("organization {}: add-on {} is not defined in billing-plans", after.name, a.addonId));
    }
    if (a.quantity < 0) {
      d.refuse(Code::CountInvalid,
               fmt::format("organization {}: add-on {} quantity {} is negative", after.name, a.addonId, a.quantity));
    }
  }
  checkReservationRemoval(cluster, before, after, d);
  ResourceList was = grantedQuota(cluster, before);
  ResourceList will = grantedQuota(cluster, after);
  const HierarchicalResourceQuota* hrq = organizationQuota(cluster, before);
  std::set<std::string> keys;
  for (const auto& [k, v] : was) keys.insert(k);
  for (const auto& [k, v] : will) keys.insert(k);
  for (const auto& key : keys) {
    std::int64_t delta = will.get(key) - was.get(key);
    if (delta > 0) {
      checkIncrease(cluster, before, after, key, delta, d);
      continue;
    }
    if (delta == 0) continue;
    std::int64_t currentHard = hrq ? hrq->hard.get(key) : was.get(key);
    std::int64_t newHard = currentHard + delta;
    std::int64_t statusUsed = hrq ? hrq->statusUsed.get(key) : 0;
    std::int64_t modelUsed = view.subtreeUsed(before.ns, key);
    std::int64_t used = std::max(statusUsed, modelUsed);
    if (used > newHard) {
      d.refuse(Code::AddonReductionBlocked,
               fmt::format("organization {}: the change lowers {} from {} to {} but {} are in use (HRQ status {}, "
                           "holders {}); stop them first: {}",
                           after.name, key, currentHard, newHard, used, statusUsed, modelUsed,
                           joined(holdersOf(cluster, before.ns, key))));
    }
  }
  return d;
}

Decision checkOrganizationCreate(const Cluster& cluster, const CapacityView& view, const Organization& created) {
  // The same question as an UPDATE from an organization holding nothing: the
  // world before has it with no add-ons and a plan-quota of Tally's keys at 0
  // (what the quota controller writes for it), so the grant is one increase.
  Organization empty{created.ns, created.name, {}, {}};
  Cluster before = cluster;
  before.organizations[objectKey(created.ns, created.name)] = empty;
  auto [at, inserted] = before.hrqs.try_emplace(objectKey(created.ns, kOrgQuotaName));
  if (inserted) {
    at->second.ns = created.ns;
    at->second.name = std::string(kOrgQuotaName);
  }
  for (const auto& key : ownedPlanQuotaKeys(before)) {
    at->second.hard.set(key, 0);
    at->second.statusHard.set(key, 0);
  }
  return checkAddonChange(before, view, empty, created);
}

PodDemand podDemand(const Cluster& cluster, const CapacityView& view, const Pod& pod) {
  return podDemandWith(cluster, view, pod, launchOf(pod, ClusterLaunchFacts(cluster)));
}

PodDemand podDemandWith(const Cluster& cluster, const CapacityView& view, const Pod& pod, Launch launch) {
  PodDemand demand;
  demand.pod = &pod;
  demand.requests = gpuRequests(cluster, pod);
  demand.organization = organizationOf(cluster, pod.ns);
  for (Kind kind : {Kind::Node, Kind::Pod, Kind::GpuDevice, Kind::DeviceClass, Kind::VirtualMachineInstance}) {
    if (!cluster.synced(kind)) {
      demand.podUnresolvable.push_back(
          {Code::CacheNotSynced, fmt::format("the {} cache is not synced yet", toString(kind))});
    }
  }
  demand.launcherOf = launch.vmi;
  if (demand.launcherOf) {
    demand.attached = std::move(launch.devices);
    // Where its devices are, by the launcher door's own rule (attachedNode):
    // a device Lost or on no node keeps the launcher from every node, as the
    // door refuses to pin it, rather than letting it run on pool units.
    if (!demand.attached.empty()) {
      SetNode set = attachedNode(cluster, *demand.launcherOf);
      if (set.decision.allowed() && set.node) {
        demand.requiredNode = *set.node;
      } else {
        for (auto& r : set.decision.refusals) demand.podUnresolvable.push_back(std::move(r));
      }
    }
  }
  // A pod already in the cache is already counted in its namespace's usage.
  bool counted = view.counts(pod);
  bool unattributedChecked = false;
  for (const auto& [resource, amount] : demand.requests) {
    std::int64_t need = amount - budgetCoverage(demand.attached, cluster, resource);
    if (need <= 0) continue;
    // GPUs beyond a VMI's devices are the pod's own: they need a tenant.
    if (!std::exchange(unattributedChecked, true)) {
      if (auto why = unattributedNamespace(cluster, pod.ns)) {
        demand.podWide.push_back({Code::NamespaceUnorganized, fmt::format("pod {}/{}: {}", pod.ns, pod.name, *why)});
      }
    }
    std::string key = budgetKeyFor(resource);
    demand.budget.add(key, need);
    BudgetAsk ask{key, counted ? 0 : need, counted ? need : 0};
    if (auto refusal = checkBudget(cluster, view, pod.ns, ask)) {
      if (refusal->code == Code::BudgetUnknown || refusal->code == Code::NamespaceUnknown) {
        demand.podUnresolvable.push_back(*refusal);
      } else {
        demand.podWide.push_back(*refusal);
      }
    }
    for (const DeviceClass* cls : classesFor(cluster, resource)) {
      demand.poolAvailable[cls->name] = poolAvailableFor(cluster, view, *cls, demand.organization);
    }
  }
  return demand;
}

namespace {

detail::ResourceFacts factsOn(const Cluster& cluster, const CapacityView& view, const Node& node,
                              std::string_view resource) {
  detail::ResourceFacts facts;
  facts.mode = poolMode(node);
  facts.cls = classServing(cluster, node, resource);
  if (!facts.cls) return facts;
  facts.eligible = !nodeIneligibility(node, *facts.cls);
  facts.served = unitsServed(node, *facts.cls).units;
  facts.used = view.nodeUsed(node.name, resource);
  facts.held = view.nodeHeld(node.name, resource);
  return facts;
}

}  // namespace

NodeVerdict filterNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand, const Node& node) {
  return detail::decideNode(
      cluster, demand, node.name, [&](std::string_view resource) { return factsOn(cluster, view, node, resource); },
      [&]() -> const Node& { return node; });
}

int scoreNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand, const Node& node,
              ScoreStrategy strategy) {
  return detail::scoreCore(
      cluster, demand, node.name, strategy,
      [&](std::string_view resource) { return factsOn(cluster, view, node, resource); },
      [&](const DeviceClass& cls) { return idleReservedByOthers(cluster, view, cls, demand.organization); });
}

namespace {

// The capacity view a node would have with some pods gone: their units leave the
// node, their budget charges leave every namespace of their chain. Preemption
// asks the filter itself whether the pod fits in that world.
class WithoutPods final : public CapacityView {
 public:
  WithoutPods(const Cluster& cluster, const CapacityView& base, const Node& node)
      : cluster_(cluster), base_(base), node_(node) {}

  void remove(const Pod& pod) {
    PodUsage u = podUsage(pod, launchOf(pod, ClusterLaunchFacts(cluster_)), cluster_);
    if (u.node == node_.name) {
      for (const auto& [r, a] : u.capacity) freed_.add(r, a);
    }
    for (const auto& scope : detail::chainOf(cluster_, pod.ns)) {
      for (const auto& [k, a] : u.budget) subtreeFreed_[scope].add(k, a);
      if (u.node == node_.name) {
        for (const auto& [r, a] : u.capacity) placedFreed_[scope].add(r, a);
      }
    }
    for (const auto& [k, a] : u.budget) namespaceFreed_[pod.ns].add(k, a);
  }

  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override {
    return base_.nodeUsed(node, resource) - (node == node_.name ? freed_.get(resource) : 0);
  }
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override {
    return base_.nodeHeld(node, resource);
  }
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override {
    return base_.subtreeUsed(ns, key) - freedIn(subtreeFreed_, ns, key);
  }
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override {
    return base_.namespaceUsed(ns, key) - freedIn(namespaceFreed_, ns, key);
  }
  bool counts(const Pod& pod) const override { return base_.counts(pod); }
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override {
    return base_.subtreePlaced(ns, resource) - freedIn(placedFreed_, ns, resource);
  }
  std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const override {
    std::int64_t free = base_.poolFreeUnits(cluster, pool);
    if (inPool(node_, pool)) free += freeUnits(node_, pool, *this) - freeUnits(node_, pool, base_);
    return free;
  }

 private:
  static std::int64_t freedIn(const std::map<std::string, ResourceList, std::less<>>& m, std::string_view ns,
                              std::string_view name) {
    auto it = m.find(ns);
    return it == m.end() ? 0 : it->second.get(name);
  }
  const Cluster& cluster_;
  const CapacityView& base_;
  const Node& node_;
  ResourceList freed_;
  std::map<std::string, ResourceList, std::less<>> subtreeFreed_, namespaceFreed_, placedFreed_;
};

bool fitsWithout(const Cluster& cluster, const CapacityView& view, const Pod& pod, const Node& node,
                 const std::vector<const Pod*>& victims) {
  WithoutPods world(cluster, view, node);
  for (const Pod* v : victims) world.remove(*v);
  PodDemand demand = podDemand(cluster, world, pod);
  return filterNode(cluster, world, demand, node).verdict == Verdict::Fits;
}

}  // namespace

std::optional<std::vector<const Pod*>> narrowVictims(const Cluster& cluster, const CapacityView& view,
                                                     const PodDemand& demand, const Node& node,
                                                     const std::vector<const Pod*>& candidates) {
  const Pod& pod = *demand.pod;
  if (filterNode(cluster, view, demand, node).verdict == Verdict::Fits) return std::vector<const Pod*>{};
  std::vector<const Pod*> onNode;
  for (const Pod* victim : candidates) {
    if (victim->nodeName == node.name && victim->uid != pod.uid) onNode.push_back(victim);
  }
  // The same decision as the filter: if even evicting every candidate leaves the
  // node refused (mode, gate, budget, idle reservations), it is no target.
  if (!fitsWithout(cluster, view, pod, node, onNode)) return std::nullopt;
  ClusterLaunchFacts facts(cluster);
  std::vector<const Pod*> kept;
  for (const Pod* victim : onNode) {
    if (fitsWithout(cluster, view, pod, node, kept)) break;
    PodUsage u = podUsage(*victim, launchOf(*victim, facts), cluster);
    bool helps = false;
    for (const auto& [resource, amount] : demand.requests) helps = helps || u.capacity.get(resource) > 0;
    for (const auto& [key, amount] : demand.budget) helps = helps || u.budget.get(key) > 0;
    if (helps) kept.push_back(victim);
  }
  if (!fitsWithout(cluster, view, pod, node, kept)) return onNode;
  return kept;
}

Decision checkPodBudget(const Cluster& cluster, const CapacityView& view, const Pod& pod) {
  return budgetRefusals(podDemand(cluster, view, pod));
}

Decision budgetRefusals(const PodDemand& demand) {
  Decision d;
  for (const auto& r : demand.podUnresolvable) {
    if (r.code == Code::BudgetUnknown || r.code == Code::NamespaceUnknown || r.code == Code::CacheNotSynced) {
      d.refusals.push_back(r);
    }
  }
  for (const auto& r : demand.podWide) d.refusals.push_back(r);
  return d;
}

}  // namespace tally::model
