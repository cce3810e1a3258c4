#include "tally/model/pool.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

#include "lookup.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"
#include "tally/model/dra.hpp"

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
  std::string text = fmt::format("{}: healthy {} >= reserved {} + non-reserved hard quota {} + spare {} (headroom {})",
                                 pool, healthy.units, reserved.units, nonReservedHard.units, spare.units, headroom);
  if (!unknown.empty()) {
    text += "; unknown, so it does not hold:";
    for (std::size_t i = 0; i < unknown.size(); ++i) text += (i ? "; " : " ") + unknown[i];
  }
  return text;
}

PoolFigures poolFigures(const PoolInvariant& inv) {
  const std::int64_t perDevice = std::max<std::int64_t>(1, inv.unitsPerDevice);
  auto count = [](std::int64_t n) { return std::max<std::int64_t>(0, n); };
  PoolFigures f;
  f.healthySchedulableDevices = count(inv.healthySchedulableDevices);
  f.healthySchedulableUnits = count(inv.healthy.units);
  f.reservedDevices = count(inv.reserved.units / perDevice);
  f.reservedUnits = count(inv.reserved.units);
  f.nonReservedHardQuota = count(inv.nonReservedHard.units);
  f.spareDevices = count(inv.spare.units / perDevice);
  f.spareUnits = count(inv.spare.units);
  f.headroom = inv.headroom;
  return f;
}

bool grantsInPool(const Cluster& cluster, const Organization& org, const DeviceClass& pool) {
  for (const auto& a : org.addons) {
    if (a.quantity == 0) continue;
    const Addon* addon = findAddon(cluster, a.addonId);
    // An add-on nobody can read may grant anything.
    if (!addon) return true;
    if (!addon->disabled && addon->gpu.contains(pool.name)) return true;
  }
  return false;
}

std::optional<Refusal> reservationMismatch(const Cluster& cluster, const ReservationRecord& record) {
  const DeviceClass* cls = detail::findClass(cluster, record.profileId);
  if (!cls) return std::nullopt;  // reported as an unknown profile elsewhere
  if (cls->allocation != Allocation::Passthrough || cls->workload != Workload::Vm) {
    return Refusal{Code::ReservationMismatch,
                   fmt::format("record {} reserves profile {}, a {} {} pool: only whole-device VM profiles "
                               "(passthrough) can be reserved",
                               record.id, cls->name, toString(cls->workload), toString(cls->allocation))};
  }
  const Addon* addon = findAddon(cluster, record.addonId);
  if (!addon) {
    return Refusal{
        Code::ReservationMismatch,
        fmt::format("record {} names add-on {}, which billing-plans does not define", record.id, record.addonId)};
  }
  auto profile = reservationProfile(*addon);
  if (!profile || *profile != record.profileId) {
    return Refusal{Code::ReservationMismatch,
                   fmt::format("record {} names add-on {}, which is not an operator-only add-on (selfService: false) "
                               "granting only devices of {}",
                               record.id, record.addonId, record.profileId)};
  }
  return std::nullopt;
}

std::int64_t spareDevices(const DeviceClass& cls, std::int64_t poolDevices) {
  if (poolDevices <= 0) return 0;
  if (cls.operatorSpareDevices && *cls.operatorSpareDevices >= 1) return *cls.operatorSpareDevices;
  if (poolDevices <= 1 && cls.singleDevicePilotApproved) return 0;
  return 1;
}

ResourceList grantQuota(const DeviceClass& profile, const GpuGrant& grant) {
  ResourceList out;
  if (profile.dra) {
    // A DRA pool: its units under its resource's key, and the same figure
    // under the key Kubernetes' ResourceQuota counts a DeviceClass's claimed
    // devices by, so HNC (and a ResourceQuota) hold claims to it as well.
    const std::int64_t units = profile.allocation == Allocation::Shared
                                   ? grant.shares + grant.devices * sharesPerDevice(profile)
                                   : grant.devices;
    if (units) {
      out.add(quotaKey(profile.resourceName), units);
      if (!profile.dra->deviceClassName.empty()) out.add(draDevicesQuotaKey(profile.dra->deviceClassName), units);
    }
    return out;
  }
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
  inv.quotaUnit = std::string(quotaUnitName(pool));
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    NodeUnits served = unitsServed(node, pool);
    inv.healthy.units += served.units;
    inv.healthySchedulableDevices += served.devices;
    inv.healthy.sources.push_back(
        {"node/" + name, served.units,
         served.notServed ? std::string(toString(served.notServed->code)) : served.shortfall});
    // A DRA pool whose slices are not all seen: its devices are neither
    // healthy nor absent, so the equation cannot be decided.
    if (served.notServed && served.notServed->code == Code::DraPoolIncomplete)
      inv.unknown.push_back(served.notServed->message);
  }
  if (pool.dra && !cluster.synced(Kind::ResourceSlice)) inv.unknown.push_back("the ResourceSlice cache is not synced");
  if (pool.dra && !cluster.synced(Kind::ResourceClaim)) inv.unknown.push_back("the ResourceClaim cache is not synced");
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name || !holdsCapacity(r.state)) continue;
    std::int64_t units = r.devices * inv.unitsPerDevice;
    inv.reserved.units += units;
    inv.reserved.sources.push_back(
        {"record/" + r.id, units, std::string(toString(r.state)) + " for " + r.organization});
  }
  if (!cluster.synced(Kind::HierarchicalResourceQuota)) inv.unknown.push_back("the HRQ cache is not synced");
  if (!cluster.synced(Kind::Organization)) inv.unknown.push_back("the Organization cache is not synced");
  if (!cluster.synced(Kind::Ledger)) inv.unknown.push_back("the reservation ledger is unknown");
  for (const auto& [key, org] : cluster.organizations) {
    if (!organizationQuota(cluster, org) && grantsInPool(cluster, org, pool)) {
      inv.unknown.push_back(
          fmt::format("hard quota of organization {}: HRQ {}/{} is missing", org.name, org.ns, kOrgQuotaName));
      inv.nonReservedHard.sources.push_back(
          {fmt::format("hrq/{}/{}", org.ns, kOrgQuotaName), 0, "unknown: the organization holds add-ons but no HRQ"});
      continue;
    }
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
    if (!gpuRequests(cluster, pod).empty() || pod.hasResourceClaims) holders.push_back("pod/" + key);
  }
  for (const auto& [key, d] : cluster.devices) {
    if (holdsNodeUnits(d) && d.node == node) holders.push_back("gpudevice/" + key);
  }
  return holders;
}

Cluster withOrganization(const Cluster& cluster, const Organization& after) {
  Cluster next = cluster;
  for (auto& [key, org] : next.organizations) {
    if (org.name != after.name) continue;
    ResourceList before = grantedQuota(next, org);
    org.addons = after.addons;
    ResourceList granted = grantedQuota(next, org);
    auto hrq = next.hrqs.find(objectKey(org.ns, kOrgQuotaName));
    if (hrq == next.hrqs.end()) continue;
    // The quota controller rewrites Tally's keys of plan-quota from the add-ons.
    for (const auto& [k, amount] : granted) hrq->second.hard.set(k, hrq->second.hard.get(k) - before.get(k) + amount);
    for (const auto& [k, amount] : before) {
      if (!granted.contains(k)) hrq->second.hard.set(k, hrq->second.hard.get(k) - amount);
    }
    hrq->second.statusHard = hrq->second.hard;
  }
  return next;
}

Cluster applyChange(const Cluster& cluster, const Change& change) {
  if (const auto* add = std::get_if<AddRecordChange>(&change)) {
    Cluster next = cluster;
    auto& records = next.ledger.records;
    auto same = std::find_if(records.begin(), records.end(),
                             [&](const ReservationRecord& r) { return r.id == add->record.id; });
    if (same != records.end()) {
      *same = add->record;  // a record's next revision replaces it: pending -> active counts once
    } else {
      records.push_back(add->record);
    }
    return next;
  }
  if (const auto* addon = std::get_if<AddonQuantityChange>(&change)) {
    const Organization* org = detail::findOrganization(cluster, addon->organization);
    if (!org) return cluster;
    Organization after = *org;
    auto it = std::find_if(after.addons.begin(), after.addons.end(),
                           [&](const AddonAssignment& a) { return a.addonId == addon->addonId; });
    if (it == after.addons.end()) {
      after.addons.push_back({addon->addonId, addon->quantity});
    } else {
      it->quantity = addon->quantity;
    }
    return withOrganization(cluster, after);
  }
  Cluster next = cluster;
  if (const auto* mode = std::get_if<NodeModeChange>(&change)) {
    auto it = next.nodes.find(mode->node);
    if (it != next.nodes.end()) it->second.expectedMode = mode->expectedMode;
  }
  return next;
}

namespace {

GateState liveGate(const Cluster& cluster, const DeviceClass& pool) {
  return evaluateGate(cluster, pool, auditPool(cluster, pool));
}

void checkRecordChange(const Cluster& cluster, const ReservationRecord& record, PlanResult& result) {
  for (auto& problem : validateRecord(record)) result.decision.refusals.push_back(problem);
  if (!detail::findClass(cluster, record.profileId)) {
    result.decision.refuse(Code::ClassUnknown, fmt::format("record {} names profile {}, which is no GPUDeviceClass",
                                                           record.id, record.profileId));
    return;
  }
  if (auto wrong = reservationMismatch(cluster, record)) result.decision.refusals.push_back(*wrong);
  std::vector<const ReservationRecord*> same;
  for (const auto& r : cluster.ledger.records) {
    if (r.id == record.id) same.push_back(&r);
  }
  if (same.size() > 1) {
    result.decision.refuse(Code::RecordDuplicate, fmt::format("record id {} appears {} times in the ledger; fix the "
                                                              "ledger before planning a change to it",
                                                              record.id, same.size()));
  } else if (same.size() == 1) {
    if (auto bad = checkRecordTransition(*same.front(), record)) result.decision.refusals.push_back(*bad);
  } else if (record.state != ReservationState::Pending) {
    result.decision.refuse(Code::RecordTransition, fmt::format("record {} is new, so it must start pending, not {}",
                                                               record.id, toString(record.state)));
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.id != record.id && r.profileId == record.profileId && inFlight(r.state) && inFlight(record.state)) {
      result.decision.refuse(Code::TransactionInFlight,
                             fmt::format("record {} ({}) is already in flight in pool {}: at most one reservation "
                                         "transaction per pool",
                                         r.id, toString(r.state), record.profileId));
    }
  }
}

}  // namespace

PlanResult plan(const Cluster& cluster, const Change& change) {
  PlanResult result;
  const Cluster after = applyChange(cluster, change);
  std::set<std::string> pools;
  // A change that sells more (a new reservation, a larger add-on) needs a gate no
  // failure closed; moving a record along, or shrinking, repairs and is allowed.
  bool grows = false;
  if (const auto* add = std::get_if<AddRecordChange>(&change)) {
    pools.insert(add->record.profileId);
    grows = std::none_of(cluster.ledger.records.begin(), cluster.ledger.records.end(),
                         [&](const ReservationRecord& r) { return r.id == add->record.id; });
    checkRecordChange(cluster, add->record, result);
  } else if (const auto* addon = std::get_if<AddonQuantityChange>(&change)) {
    const Addon* known = findAddon(cluster, addon->addonId);
    const Organization* org = detail::findOrganization(cluster, addon->organization);
    if (!known) {
      result.decision.refuse(Code::AddonUnknown, fmt::format("add-on {} is not in billing-plans", addon->addonId));
    } else {
      for (const auto& [profile, grant] : known->gpu) pools.insert(profile);
    }
    if (org) {
      auto it = std::find_if(org->addons.begin(), org->addons.end(),
                             [&](const AddonAssignment& a) { return a.addonId == addon->addonId; });
      grows = addon->quantity > (it == org->addons.end() ? 0 : it->quantity);
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
      auto joined = affectedPools(cluster, moved);
      // A node that does not advertise its new mode's devices yet may join any
      // pool of that mode: each must be ready for it.
      if (joined.empty()) {
        for (const auto& [name, cls] : cluster.classes) {
          if (cls.nodeMode == mode->expectedMode) joined.push_back(name);
        }
      }
      for (auto& p : joined) pools.insert(p);
      auto holders = nodeHolders(cluster, mode->node);
      if (!holders.empty()) {
        std::string names;
        for (const auto& h : holders) names += (names.empty() ? "" : ", ") + h;
        result.decision.refuse(Code::ModeTransitionBlocked,
                               fmt::format("node {} cannot switch to '{}' while {} holder(s) remain: {}", mode->node,
                                           toString(mode->expectedMode), holders.size(), names));
      }
      // The seed's step 3: a sequential node moves only with both pools' creation gates closed.
      for (const auto& name : pools) {
        const DeviceClass* cls = detail::findClass(cluster, name);
        if (cls && liveGate(cluster, *cls).open) {
          result.decision.refuse(Code::ModeTransitionBlocked,
                                 fmt::format("node {} cannot switch modes while creation in pool {} is open: close it "
                                             "first (spec.creationPaused: true on GPUDeviceClass {})",
                                             mode->node, name, name));
        }
      }
    }
  }
  for (const auto& name : pools) {
    const DeviceClass* before = detail::findClass(cluster, name);
    if (!before) continue;
    // The gate the doors apply (the published decision, as tallyctl reads it),
    // or a failure the audit finds now that no auditor has published yet.
    GateState gate = doorGate(cluster, *before);
    if (!gate.failed()) {
      if (GateState live = liveGate(cluster, *before); live.failed()) gate = std::move(live);
    }
    if (grows && gate.undecided) result.decision.refuse(Code::GateClosed, gate.reason);
    if (grows && gate.failed()) {
      result.decision.refuse(Code::GateClosed, fmt::format("pool {} is closed by a failed audit ({}): {}", name,
                                                           gate.failureId, gate.reason));
    }
    result.gates.push_back(std::move(gate));
    result.before.push_back(evaluateInvariant(cluster, *before));
    PoolInvariant next = evaluateInvariant(after, *detail::findClass(after, name));
    if (!next.unknown.empty()) {
      result.decision.refuse(Code::InvariantUnknown, "after the change " + next.equation());
    } else if (!next.holds() && next.headroom < result.before.back().headroom) {
      // A change that leaves a broken pool better off (a reduction) is not refused.
      result.decision.refuse(Code::InvariantBroken, "after the change " + next.equation());
    }
    result.after.push_back(std::move(next));
  }
  // The add-on door and the equation may refuse for the same reason: say it once.
  auto& refusals = result.decision.refusals;
  std::vector<Refusal> unique;
  for (auto& r : refusals) {
    if (std::find(unique.begin(), unique.end(), r) == unique.end()) unique.push_back(std::move(r));
  }
  refusals = std::move(unique);
  return result;
}

}  // namespace tally::model
