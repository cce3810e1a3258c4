#include "tally/model/quota.hpp"

#include <fmt/format.h>

#include <set>

#include "lookup.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/dra.hpp"

namespace tally::model {

namespace {

const std::string kHamiMemoryKey = quotaKey("nvidia.com/gpumem");
const std::string kHamiCoresKey = quotaKey("nvidia.com/gpucores");

const Addon* findAddon(const Cluster& cluster, std::string_view id) {
  if (!cluster.plans) return nullptr;
  auto it = cluster.plans->addons.find(std::string(id));
  return it == cluster.plans->addons.end() ? nullptr : &it->second;
}

// What the organization's add-ons grant in one pool, by quota key; only the
// add-on `onlyAddon` when it is given, every other one when `exceptAddon` is.
ResourceList poolGrant(const Cluster& cluster, const Organization& org, const DeviceClass& pool,
                       std::string_view onlyAddon = {}, std::string_view exceptAddon = {}) {
  ResourceList out;
  for (const auto& a : org.addons) {
    if (!onlyAddon.empty() && a.addonId != onlyAddon) continue;
    if (!exceptAddon.empty() && a.addonId == exceptAddon) continue;
    const Addon* addon = findAddon(cluster, a.addonId);
    if (!addon || addon->disabled) continue;
    auto it = addon->gpu.find(pool.name);
    if (it == addon->gpu.end()) continue;
    for (const auto& [key, amount] : grantQuota(pool, it->second)) out.add(key, amount * a.quantity);
  }
  return out;
}

bool grows(const ResourceList& before, const ResourceList& after) {
  for (const auto& [key, amount] : after) {
    if (amount > before.get(key)) return true;
  }
  return false;
}

std::string describe(const ResourceList& list) {
  std::string out;
  for (const auto& [key, amount] : list) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", amount, key);
  return out.empty() ? "nothing" : out;
}

}  // namespace

std::vector<std::string> ownedPlanQuotaKeys(const Cluster& cluster) {
  std::set<std::string> keys;
  for (const auto& [name, cls] : cluster.classes) {
    keys.insert(quotaKey(cls.resourceName));
    if (cls.dra) {
      if (!cls.dra->deviceClassName.empty()) keys.insert(draDevicesQuotaKey(cls.dra->deviceClassName));
      continue;
    }
    if (cls.allocation == Allocation::Shared) {
      keys.insert(quotaKey("nvidia.com/gpu"));
      keys.insert(kHamiMemoryKey);
      keys.insert(kHamiCoresKey);
    }
  }
  return {keys.begin(), keys.end()};
}

PlanQuota desiredPlanQuota(const Cluster& cluster, const Organization& org) {
  PlanQuota out;
  if (!cluster.synced(Kind::BillingPlans)) out.unknown.push_back("the billing-plans cache is not synced");
  if (!cluster.synced(Kind::DeviceClass)) out.unknown.push_back("the GPUDeviceClass cache is not synced");
  if (cluster.synced(Kind::BillingPlans) && !cluster.plans) {
    out.unknown.push_back("billing-plans (the add-on catalogue) is missing or unreadable");
  }
  if (!out.known()) return out;
  for (const auto& a : org.addons) {
    if (a.quantity < 0) {
      out.unknown.push_back(fmt::format("add-on {} has a negative quantity {}", a.addonId, a.quantity));
      continue;
    }
    if (a.quantity == 0) continue;
    const Addon* addon = findAddon(cluster, a.addonId);
    if (!addon) {
      out.unknown.push_back(
          fmt::format("add-on {} (quantity {}) is not defined in billing-plans", a.addonId, a.quantity));
      continue;
    }
    if (addon->disabled) continue;
    for (const auto& [profile, grant] : addon->gpu) {
      if (!detail::findClass(cluster, profile)) {
        out.unknown.push_back(
            fmt::format("add-on {} grants profile {}, which is no GPUDeviceClass", a.addonId, profile));
      }
    }
  }
  if (!out.known()) return out;
  const ResourceList granted = grantedQuota(cluster, org);
  for (const auto& key : ownedPlanQuotaKeys(cluster)) out.hard.set(key, granted.get(key));
  return out;
}

std::vector<ProjectCap> projectCaps(const Cluster& cluster) {
  std::map<std::string, ProjectCap> caps;
  if (!cluster.synced(Kind::Ledger)) return {};
  for (const auto& r : cluster.ledger.records) {
    if (r.project.empty()) continue;
    const Organization* org = detail::findOrganization(cluster, r.organization);
    const std::string orgNs = org ? org->ns : r.organization;
    if (r.project == orgNs) continue;
    ProjectCap& cap = caps[r.project];
    cap.ns = r.project;
    cap.records.push_back(r.id);
    const DeviceClass* cls = detail::findClass(cluster, r.profileId);
    if (cls && holdsCapacity(r.state) && r.devices > 0) {
      cap.hard.add(quotaKey(cls->resourceName), r.devices);
      if (cls->dra && !cls->dra->deviceClassName.empty())
        cap.hard.add(draDevicesQuotaKey(cls->dra->deviceClassName), r.devices);
    }
  }
  std::vector<ProjectCap> out;
  for (auto& [ns, cap] : caps) out.push_back(std::move(cap));
  return out;
}

std::optional<std::map<std::string, AcceleratorUsage>> acceleratorStatus(const Cluster& cluster,
                                                                         const Organization& org) {
  const HierarchicalResourceQuota* hrq = organizationQuota(cluster, org);
  if (!hrq || hrq->statusHard.empty()) return std::nullopt;
  auto read = [&](const std::string& key) -> std::optional<HardUsed> {
    if (!hrq->statusHard.contains(key) && !hrq->statusUsed.contains(key)) return std::nullopt;
    return HardUsed{hrq->statusHard.get(key), hrq->statusUsed.get(key)};
  };
  std::map<std::string, AcceleratorUsage> out;
  for (const auto& [name, cls] : cluster.classes) {
    AcceleratorUsage usage;
    if (cls.allocation == Allocation::Shared) {
      usage.shares = read(quotaKey(cls.resourceName));
      usage.memoryMiB = read(kHamiMemoryKey);
      usage.corePercent = read(kHamiCoresKey);
    } else {
      usage.devices = read(quotaKey(cls.resourceName));
    }
    if (usage != AcceleratorUsage{}) out[name] = usage;
  }
  return out;
}

std::optional<Refusal> grantDuringTransaction(const Cluster& cluster, const Organization& before,
                                              const Organization& after, const DeviceClass& pool) {
  const ResourceList was = poolGrant(cluster, before, pool);
  const ResourceList will = poolGrant(cluster, after, pool);
  if (!grows(was, will)) return std::nullopt;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name || r.state != ReservationState::Releasing) continue;
    return Refusal{Code::TransactionInFlight,
                   fmt::format("organization {}: the change grants more in pool {} ({} -> {}) while record {} of "
                               "organization {} is releasing there; no grant grows until it is released",
                               after.name, pool.name, describe(was), describe(will), r.id, r.organization)};
  }
  const ReservationRecord* pending = nullptr;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && r.state == ReservationState::Pending) pending = &r;
  }
  if (!pending) return std::nullopt;
  const ReservationRecord& r = *pending;
  if (r.organization != after.name) {
    return Refusal{Code::TransactionInFlight,
                   fmt::format("organization {}: the change grants more in pool {} ({} -> {}) while record {} of "
                               "organization {} is pending there: one capacity transaction per pool at a time",
                               after.name, pool.name, describe(was), describe(will), r.id, r.organization)};
  }
  if (grows(poolGrant(cluster, before, pool, {}, r.addonId), poolGrant(cluster, after, pool, {}, r.addonId))) {
    return Refusal{Code::TransactionInFlight,
                   fmt::format("organization {}: while record {} is pending in pool {} only its add-on {} may grow "
                               "there, but the change grants more through other add-ons ({} -> {})",
                               after.name, r.id, pool.name, r.addonId, describe(was), describe(will))};
  }
  std::int64_t reserved = 0;
  for (const auto& other : cluster.ledger.records) {
    if (other.profileId == pool.name && other.organization == r.organization &&
        (other.state == ReservationState::Pending || other.state == ReservationState::Active)) {
      reserved += other.devices;
    }
  }
  const std::string key = quotaKey(pool.resourceName);
  const std::int64_t granted = poolGrant(cluster, after, pool, r.addonId).get(key);
  if (granted > reserved) {
    return Refusal{Code::TransactionInFlight,
                   fmt::format("organization {}: add-on {} would grant {} {} in pool {}, but its pending and active "
                               "records (pending {}) reserve {}",
                               after.name, r.addonId, granted, key, pool.name, r.id, reserved)};
  }
  return std::nullopt;
}

}  // namespace tally::model
