// The claim door: a ResourceClaim at CREATE checked as an order of its GPU
// classes (see claim_admission.hpp).

#include "tally/model/claim_admission.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>

#include "lookup.hpp"
#include "saturating.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"

namespace tally::model {

namespace {

using detail::saturatingAdd;

// The pools of the class whose figures are unknown (describe()), once each.
std::vector<std::string> unknownPools(const Cluster& cluster, const DeviceClass& cls) {
  std::set<std::string> out;
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, cls)) continue;
    for (const auto& u : draUnitsOn(node, cls).unknown) out.insert(u);
  }
  return {out.begin(), out.end()};
}

ResourceClaim asCreated(ResourceClaim claim) {
  claim.allocated = false;
  claim.results.clear();
  claim.deleting = false;
  return claim;
}

// Usage with the in-flight claims' budget added, for the budget rule.
class WithInFlight final : public UsageReader {
 public:
  WithInFlight(const Cluster& cluster, const UsageReader& base, const std::vector<ResourceClaim>& inFlight)
      : base_(base) {
    for (const auto& claim : inFlight) {
      const ClaimUsage usage = claimUsage(cluster, asCreated(claim));
      for (const auto& [key, units] : usage.budget) {
        namespaces_[claim.ns].add(key, units);
        for (const auto& ancestor : detail::chainOf(cluster, claim.ns)) subtrees_[ancestor].add(key, units);
      }
    }
  }
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override {
    auto it = subtrees_.find(ns);
    return base_.subtreeUsed(ns, key) + (it == subtrees_.end() ? 0 : it->second.get(key));
  }
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override {
    auto it = namespaces_.find(ns);
    return base_.namespaceUsed(ns, key) + (it == namespaces_.end() ? 0 : it->second.get(key));
  }

 private:
  const UsageReader& base_;
  std::map<std::string, ResourceList, std::less<>> namespaces_, subtrees_;
};

// Why the class cannot take `units` more for the claim, or nothing.
// `pending`: units of the class admitted in flight.
std::vector<Refusal> choiceRefusals(const Cluster& cluster, const CapacityView& view, const DeviceClass& cls,
                                    std::int64_t units, std::int64_t pending, std::string_view ns,
                                    std::string_view subject) {
  std::vector<Refusal> out;
  if (cls.deleting) {
    out.push_back(
        {Code::ClassDeleting, fmt::format("GPU class {} is being deleted and accepts no new claims", cls.name)});
    return out;
  }
  if (!cls.gateOpen) out.push_back({Code::GateClosed, gateClosedMessage(cls)});
  if (auto why = notEntitled(cluster, ns, cls)) out.push_back({Code::NotEntitled, *why});
  const std::int64_t free = saturatingAdd(view.poolFreeUnits(cluster, cls), -std::max<std::int64_t>(0, pending));
  const std::int64_t idle = idleReservedByOthers(cluster, view, cls, organizationOf(cluster, ns));
  if (free < units) {
    const auto unknown = unknownPools(cluster, cls);
    if (!unknown.empty()) {
      out.push_back({Code::DraPoolIncomplete,
                     fmt::format("pool {} has {} free {} known; {} asks for {}, and {}, so more cannot be proven free",
                                 cls.name, free, quotaUnitName(cls), subject, units, fmt::join(unknown, "; "))});
    } else {
      out.push_back({Code::PoolInsufficient, fmt::format("pool {} has {} free {}; {} asks for {}", cls.name, free,
                                                         quotaUnitName(cls), subject, units)});
    }
  } else if (saturatingAdd(free, -idle) < units) {
    out.push_back({Code::ReservedForOthers,
                   fmt::format("pool {} has {} free {} but {} back idle reservations of other organizations; {} asks "
                               "for {}",
                               cls.name, free, quotaUnitName(cls), idle, subject, units)});
  } else {
    // A claim is allocated on one node: some node must hold all of it (the
    // first found ends the search; the most free is worked out for the
    // refusal only).
    std::int64_t most = 0;
    for (const auto& [name, node] : cluster.nodes) {
      if (!inPool(node, cls)) continue;
      most = std::max(most, freeUnits(node, cls, view));
      if (most >= units) break;
    }
    if (most < units) {
      out.push_back({Code::NoSingleNode, fmt::format("no single node has {} free {} of pool {} for {}; the most free "
                                                     "on one node is {}",
                                                     units, quotaUnitName(cls), cls.name, subject, most)});
    }
  }
  return out;
}

}  // namespace

Decision checkClaimAtCreate(const Cluster& cluster, const CapacityView& view, const ResourceClaim& claim,
                            std::string_view subject, const std::vector<ResourceClaim>& inFlight) {
  Decision d;
  // The scheduler's claim for a pod's extended-resource request: the pod was
  // decided at its own doors, with those units.
  if (claim.extendedResource) return d;
  for (Kind kind : {Kind::Node, Kind::DeviceClass, Kind::ResourceSlice, Kind::ResourceClaim, Kind::GpuDevice}) {
    if (!cluster.synced(kind)) {
      d.refuse(Code::CacheNotSynced,
               fmt::format("{} refused: the {} cache is not synced yet", subject, toString(kind)));
      return d;
    }
  }
  const ClaimUsage usage = claimUsage(cluster, asCreated(claim));
  if (usage.budget.empty()) return d;  // nothing Tally sells
  if (auto why = unattributedNamespace(cluster, claim.ns)) {
    d.refuse(Code::NamespaceUnorganized, fmt::format("{} refused: {}", subject, *why));
  }
  // Each request needs one of its choices to fit; claims of several requests
  // on one class need their sum.
  std::map<std::string, std::int64_t> demand;  // class name -> units of the choices taken
  // class name -> units of claims admitted and not allocated yet: in flight,
  // or in the cluster waiting for the allocator (demand on the pool already).
  ResourceList inFlightUnits;
  for (const auto& other : inFlight)
    for (const auto& [cls, units] : claimPendingUnits(cluster, asCreated(other))) inFlightUnits.add(cls, units);
  std::map<std::string, std::int64_t> pending;
  auto pendingOf = [&](const DeviceClass& cls) {
    auto [it, fresh] = pending.try_emplace(cls.name, 0);
    if (fresh) it->second = saturatingAdd(view.pendingClaimUnits(cluster, cls), inFlightUnits.get(cls.name));
    return it->second;
  };
  for (const auto& request : claim.requests) {
    std::vector<Refusal> first;
    bool fits = false;
    bool gpu = false;
    for (const auto& choice : request.choices) {
      if (choice.adminAccess) {
        fits = true;
        break;
      }
      const DeviceClass* cls = draClassForRequest(cluster, choice.deviceClassName);
      if (!cls) {
        fits = true;  // a device Tally does not sell (a NIC): not its door
        break;
      }
      gpu = true;
      const std::int64_t units = choiceUnits(cluster, *cls, choice);
      auto refusals = choiceRefusals(cluster, view, *cls, saturatingAdd(demand[cls->name], units), pendingOf(*cls),
                                     claim.ns, subject);
      if (refusals.empty()) {
        demand[cls->name] = saturatingAdd(demand[cls->name], units);
        fits = true;
        break;
      }
      if (first.empty()) first = std::move(refusals);
    }
    if (gpu && !fits) d.refusals.insert(d.refusals.end(), first.begin(), first.end());
  }
  const WithInFlight budgets(cluster, view, inFlight);
  for (const auto& [key, units] : usage.budget) {
    if (auto refusal = checkBudget(cluster, budgets, claim.ns, BudgetAsk{key, units, 0}))
      d.refusals.push_back(*refusal);
  }
  return d;
}

}  // namespace tally::model
