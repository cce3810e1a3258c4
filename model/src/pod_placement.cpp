// Pods: a pod's demand, the per-node filter and score, the victims
// preemption needs, and a pod's budget refusals.

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
#include "tally/model/dra.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/quota.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

using detail::findClass;
using detail::namespacedRange;

namespace {

std::int64_t poolAvailableFor(const Cluster& cluster, const CapacityView& view, const DeviceClass& cls,
                              const Organization* org) {
  return view.poolFreeUnits(cluster, cls) - idleReservedByOthers(cluster, view, cls, org);
}

}  // namespace

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
    // A licensed class the namespace is not entitled to, on no node (a class
    // sharing the resource without a licence does not lift it: fail closed).
    for (const DeviceClass* cls : classesFor(cluster, resource)) {
      if (auto why = notEntitled(cluster, pod.ns, *cls)) {
        demand.podWide.push_back({Code::NotEntitled, fmt::format("pod {}/{}: {}", pod.ns, pod.name, *why)});
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
  if (!pod.claims.empty()) {
    PodClaimUnits claims = podClaimUnits(cluster, view, pod);
    for (auto& why : claims.unseen) demand.podWide.push_back({Code::ClaimNotSeen, std::move(why)});
    for (const auto& [resource, units] : claims.byResource) {
      demand.requests.add(resource, units);
      demand.claimUnits.add(resource, units);
      for (const DeviceClass* cls : classesFor(cluster, resource)) {
        if (!demand.poolAvailable.contains(cls->name)) {
          demand.poolAvailable[cls->name] = poolAvailableFor(cluster, view, *cls, demand.organization);
        }
      }
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
  std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view key) const override {
    return base_.claimAsks(cluster, key);
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
