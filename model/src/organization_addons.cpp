// Organization add-ons: a grant's increase against the pool's gate and
// equation, a reservation add-on never lowered below its records, an
// Organization's CREATE decided as the same grant added to nothing.

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

}  // namespace tally::model
