#include "tally/model/pool.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "lookup.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

namespace {

const Addon* findAddon(const Cluster& cluster, std::string_view id) {
  if (!cluster.plans) return nullptr;
  auto it = cluster.plans->addons.find(std::string(id));
  return it == cluster.plans->addons.end() ? nullptr : &it->second;
}

std::vector<std::string> affectedPools(const Cluster& cluster, const Node& node) {
  std::vector<std::string> out;
  for (const auto& [name, cls] : cluster.classes) {
    if (inPool(node, cls)) out.push_back(name);
  }
  return out;
}

}  // namespace

std::string PoolInvariant::equation() const {
  return fmt::format("{}: healthy {} >= reserved {} + non-reserved hard quota {} + spare {} (headroom {})", pool,
                     healthy.units, reserved.units, nonReservedHard.units, spare.units, headroom);
}

std::int64_t spareDevices(const DeviceClass& cls, std::int64_t poolDevices) {
  if (cls.operatorSpareDevices && *cls.operatorSpareDevices >= 1) return *cls.operatorSpareDevices;
  if (poolDevices <= 1 && cls.singleDevicePilotApproved) return 0;
  return 1;
}

ResourceList grantQuota(const DeviceClass& profile, const GpuGrant& grant) {
  ResourceList out;
  if (profile.allocation == Allocation::Shared) {
    std::int64_t shares = grant.shares + grant.devices * sharesPerDevice(profile);
    if (shares) out.add(quotaKey(profile.resourceName), shares);
    if (grant.memoryMiB) out.add(quotaKey("nvidia.com/gpumem"), grant.memoryMiB);
    if (grant.corePercent) out.add(quotaKey("nvidia.com/gpucores"), grant.corePercent);
  } else if (grant.devices) {
    out.add(quotaKey(profile.resourceName), grant.devices);
  }
  return out;
}

ResourceList grantedQuota(const Cluster& cluster, const Organization& org) {
  ResourceList out;
  for (const auto& a : org.addons) {
    const Addon* addon = findAddon(cluster, a.addonId);
    if (!addon || addon->disabled) continue;
    for (const auto& [profile, grant] : addon->gpu) {
      const DeviceClass* cls = detail::findClass(cluster, profile);
      if (!cls) continue;
      for (const auto& [key, amount] : grantQuota(*cls, grant)) out.add(key, amount * a.quantity);
    }
  }
  return out;
}

std::int64_t reservationGrantUnits(const Cluster& cluster, const Organization& org, const DeviceClass& pool) {
  std::int64_t units = 0;
  for (const auto& a : org.addons) {
    const Addon* addon = findAddon(cluster, a.addonId);
    if (!addon || addon->disabled) continue;
    auto profile = reservationProfile(*addon);
    if (profile && *profile == pool.name) {
      units += a.quantity * grantQuota(pool, addon->gpu.begin()->second).get(quotaKey(pool.resourceName));
    }
  }
  return units;
}

std::int64_t hardQuotaUnits(const Cluster& cluster, const Organization& org, const DeviceClass& pool) {
  const HierarchicalResourceQuota* hrq = organizationQuota(cluster, org);
  if (!hrq) return 0;
  const std::string key = quotaKey(pool.resourceName);
  std::int64_t hard = hrq->hard.get(key);
  std::vector<const DeviceClass*> sharing = classesFor(cluster, pool.resourceName);
  if (sharing.size() <= 1) return hard;
  auto grantedFor = [&](const DeviceClass& cls) {
    std::int64_t units = 0;
    for (const auto& a : org.addons) {
      const Addon* addon = findAddon(cluster, a.addonId);
      if (!addon || addon->disabled) continue;
      auto it = addon->gpu.find(cls.name);
      if (it != addon->gpu.end()) units += a.quantity * grantQuota(cls, it->second).get(key);
    }
    return units;
  };
  std::int64_t explained = 0;
  for (const DeviceClass* cls : sharing) explained += grantedFor(*cls);
  return grantedFor(pool) + std::max<std::int64_t>(0, hard - explained);
}

PoolInvariant evaluateInvariant(const Cluster& cluster, const DeviceClass& pool) {
  PoolInvariant inv;
  inv.pool = pool.name;
  inv.quotaKey = quotaKey(pool.resourceName);
  inv.unitsPerDevice = unitsPerDevice(pool);
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    NodeUnits served = unitsServed(node, pool);
    inv.healthy.units += served.units;
    inv.healthySchedulableDevices += served.devices;
    inv.healthy.sources.push_back(
        {"node/" + name, served.units, served.notServed ? std::string(toString(served.notServed->code)) : ""});
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name || !holdsCapacity(r.state)) continue;
    std::int64_t units = r.devices * inv.unitsPerDevice;
    inv.reserved.units += units;
    inv.reserved.sources.push_back({"record/" + r.id, units, std::string(toString(r.state)) + " for " + r.organization});
  }
  for (const auto& [key, org] : cluster.organizations) {
    std::int64_t hard = hardQuotaUnits(cluster, org, pool);
    std::int64_t reservedGrant = reservationGrantUnits(cluster, org, pool);
    std::int64_t nonReserved = std::max<std::int64_t>(0, hard - reservedGrant);
    if (hard == 0 && reservedGrant == 0) continue;
    inv.nonReservedHard.units += nonReserved;
    inv.nonReservedHard.sources.push_back({fmt::format("hrq/{}/{}", org.ns, kOrgQuotaName), nonReserved,
                                           fmt::format("hard {} minus reservation add-ons {}", hard, reservedGrant)});
  }
  std::int64_t spare = spareDevices(pool, inv.healthySchedulableDevices);
  inv.spare.units = spare * inv.unitsPerDevice;
  inv.spare.sources.push_back({"gpudeviceclass/" + pool.name, inv.spare.units,
                               pool.operatorSpareDevices ? "operatorSpareDevices" : "default spare"});
  inv.headroom = inv.healthy.units - (inv.reserved.units + inv.nonReservedHard.units + inv.spare.units);
  return inv;
}

std::vector<std::string> nodeHolders(const Cluster& cluster, std::string_view node) {
  std::vector<std::string> holders;
  for (const auto& [key, pod] : cluster.pods) {
    if (pod.nodeName != node || isTerminal(pod)) continue;
    if (!effectiveRequests(pod).empty() || pod.hasResourceClaims) holders.push_back("pod/" + key);
  }
  for (const auto& [key, d] : cluster.devices) {
    if (holdsNodeUnits(d) && d.node == node) holders.push_back("gpudevice/" + key);
  }
  return holders;
}

Cluster applyChange(const Cluster& cluster, const Change& change) {
  Cluster next = cluster;
  if (const auto* add = std::get_if<AddRecordChange>(&change)) {
    next.ledger.records.push_back(add->record);
  } else if (const auto* addon = std::get_if<AddonQuantityChange>(&change)) {
    for (auto& [key, org] : next.organizations) {
      if (org.name != addon->organization) continue;
      ResourceList before = grantedQuota(next, org);
      auto it = std::find_if(org.addons.begin(), org.addons.end(),
                             [&](const AddonAssignment& a) { return a.addonId == addon->addonId; });
      if (it == org.addons.end()) {
        org.addons.push_back({addon->addonId, addon->quantity});
      } else {
        it->quantity = addon->quantity;
      }
      ResourceList after = grantedQuota(next, org);
      auto hrq = next.hrqs.find(objectKey(org.ns, kOrgQuotaName));
      if (hrq != next.hrqs.end()) {
        // The quota controller rewrites Tally's keys of plan-quota from the add-ons.
        for (const auto& [k, amount] : after) hrq->second.hard.set(k, hrq->second.hard.get(k) - before.get(k) + amount);
        for (const auto& [k, amount] : before) {
          if (!after.contains(k)) hrq->second.hard.set(k, hrq->second.hard.get(k) - amount);
        }
      }
    }
  } else if (const auto* mode = std::get_if<NodeModeChange>(&change)) {
    auto it = next.nodes.find(mode->node);
    if (it != next.nodes.end()) it->second.expectedMode = mode->expectedMode;
  }
  return next;
}

PlanResult plan(const Cluster& cluster, const Change& change) {
  PlanResult result;
  const Cluster after = applyChange(cluster, change);
  std::set<std::string> pools;
  if (const auto* add = std::get_if<AddRecordChange>(&change)) {
    pools.insert(add->record.profileId);
    for (auto& problem : validateRecord(add->record)) result.decision.refusals.push_back(problem);
    if (!detail::findClass(cluster, add->record.profileId)) {
      result.decision.refuse(Code::ClassUnknown,
                             fmt::format("record {} names profile {}, which is no GPUDeviceClass", add->record.id,
                                         add->record.profileId));
    }
  } else if (const auto* addon = std::get_if<AddonQuantityChange>(&change)) {
    const Addon* known = findAddon(cluster, addon->addonId);
    const Organization* org = detail::findOrganization(cluster, addon->organization);
    if (!known) {
      result.decision.refuse(Code::AddonUnknown, fmt::format("add-on {} is not in billing-plans", addon->addonId));
    } else {
      for (const auto& [profile, grant] : known->gpu) pools.insert(profile);
    }
    if (org && known) {
      const Organization* changed = detail::findOrganization(after, addon->organization);
      TotalsCapacityView view(cluster, computeUsage(cluster));
      Decision d = checkAddonChange(cluster, view, *org, *changed);
      for (auto& r : d.refusals) result.decision.refusals.push_back(r);
    } else if (!org) {
      result.decision.refuse(Code::NamespaceUnknown, fmt::format("organization {} not found", addon->organization));
    }
  } else if (const auto* mode = std::get_if<NodeModeChange>(&change)) {
    auto it = cluster.nodes.find(mode->node);
    if (it == cluster.nodes.end()) {
      result.decision.refuse(Code::NodeNotServed, fmt::format("node {} not found", mode->node));
    } else {
      for (auto& p : affectedPools(cluster, it->second)) pools.insert(p);
      Node moved = it->second;
      moved.expectedMode = mode->expectedMode;
      for (auto& p : affectedPools(cluster, moved)) pools.insert(p);
      auto holders = nodeHolders(cluster, mode->node);
      if (!holders.empty()) {
        std::string names;
        for (const auto& h : holders) names += (names.empty() ? "" : ", ") + h;
        result.decision.refuse(Code::ModeTransitionBlocked,
                               fmt::format("node {} cannot switch to '{}' while {} holder(s) remain: {}", mode->node,
                                           toString(mode->expectedMode), holders.size(), names));
      }
    }
  }
  for (const auto& name : pools) {
    const DeviceClass* before = detail::findClass(cluster, name);
    if (!before) continue;
    result.before.push_back(evaluateInvariant(cluster, *before));
    PoolInvariant next = evaluateInvariant(after, *detail::findClass(after, name));
    // A change that leaves a broken pool better off (a reduction) is not refused.
    if (!next.holds() && next.headroom < result.before.back().headroom) {
      result.decision.refuse(Code::InvariantBroken, "after the change " + next.equation());
    }
    result.after.push_back(std::move(next));
  }
  return result;
}

}  // namespace tally::model
