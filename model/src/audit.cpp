#include "tally/model/audit.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "lookup.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/sources.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"

namespace tally::model {

std::string_view toString(FindingCode code) {
  switch (code) {
    case FindingCode::MissingLedgerRecord: return "MissingLedgerRecord";
    case FindingCode::UnknownAddon: return "UnknownAddon";
    case FindingCode::StaleCapacity: return "StaleCapacity";
    case FindingCode::HardQuotaAboveCapacity: return "HardQuotaAboveCapacity";
    case FindingCode::DuplicateReservationId: return "DuplicateReservationId";
    case FindingCode::ProfileModeMismatch: return "ProfileModeMismatch";
    case FindingCode::ActiveAlert: return "ActiveAlert";
    case FindingCode::StatusDisagreement: return "StatusDisagreement";
    case FindingCode::MultipleTransactions: return "MultipleTransactions";
    case FindingCode::InvalidRecord: return "InvalidRecord";
    case FindingCode::QuotaUnknown: return "QuotaUnknown";
    case FindingCode::UnattributedQuantity: return "UnattributedQuantity";
    case FindingCode::BothDevicePlugins: return "BothDevicePlugins";
    case FindingCode::DegradedHealth: return "DegradedHealth";
    case FindingCode::SharedNodeWithoutInventory: return "SharedNodeWithoutInventory";
    case FindingCode::NodeOvercommitted: return "NodeOvercommitted";
    case FindingCode::LedgerNotConfigured: return "LedgerNotConfigured";
    case FindingCode::UnorganizedGpuUse: return "UnorganizedGpuUse";
    case FindingCode::DraPoolIncomplete: return "DraPoolIncomplete";
    case FindingCode::DevicePluginAndDra: return "DevicePluginAndDra";
  }
  return "Unknown";
}

bool failsClosed(FindingCode code) { return code != FindingCode::SharedNodeWithoutInventory; }

bool convergent(FindingCode code) {
  return code == FindingCode::StatusDisagreement || code == FindingCode::UnattributedQuantity ||
         code == FindingCode::QuotaUnknown;
}

std::string findingKey(const Finding& f) {
  return fmt::format("{}|{}", toString(f.code), f.subject.empty() ? f.message : f.subject);
}

std::string_view remedy(FindingCode code) {
  switch (code) {
    case FindingCode::MissingLedgerRecord:
      return "commit the GPUReservationRecord that grants this quantity to the ledger (tallyctl plan --record "
             "first), or lower the organization's add-on to what the ledger records";
    case FindingCode::UnknownAddon:
      return "define the add-on in the billing-plans ConfigMap, or remove it from the organization";
    case FindingCode::StaleCapacity:
      return "restore the named source (API server watch, ledger directory) so its cache syncs again; the "
             "finding clears at the next audit once it is current";
    case FindingCode::HardQuotaAboveCapacity:
      return "restore the capacity equation: lower add-on quantities (or HRQ hard quotas) to what the pool serves, "
             "or add nodes to the pool (tallyctl plan evaluates a change first)";
    case FindingCode::DuplicateReservationId:
      return "give each GPUReservationRecord a unique id and remove the duplicate from the ledger";
    case FindingCode::ProfileModeMismatch:
      return "make the class, its nodes, KubeVirt's permitted host devices and the reservations agree: the node "
             "mode the class names on every node of the pool, a profile of the pool's allocation on each record";
    case FindingCode::ActiveAlert:
      return "resolve the condition the alert reports; the finding clears when the alert stops firing";
    case FindingCode::StatusDisagreement:
      return "make the named objects agree: let HNC converge HRQ status.hard to spec.hard, the organization's "
             "status to its HRQ, and active records name existing organizations and add-ons";
    case FindingCode::MultipleTransactions:
      return "finish or cancel all but one pending/releasing record of the pool (one transaction at a time)";
    case FindingCode::InvalidRecord:
      return "fix the record (tallyctl ledger validate names each problem) and commit it again";
    case FindingCode::QuotaUnknown:
      return "create the organization's HRQ plan-quota (or make it readable to Tally) so its GPU quota is known";
    case FindingCode::UnattributedQuantity:
      return "make the HRQ hard quota equal what the organization's add-ons grant (or assign the add-on that "
             "explains it), and grant only profiles a class of the pool sells";
    case FindingCode::BothDevicePlugins:
      return "run one device plugin per node: remove the VM GPU plugin or HAMi from the node";
    case FindingCode::DegradedHealth:
      return "repair or drain the unhealthy GPU parent, or lower what the node advertises to what it can serve";
    case FindingCode::SharedNodeWithoutInventory:
      return "publish the node's HAMi GPU inventory so its shared units are served (informational only)";
    case FindingCode::NodeOvercommitted:
      return "free the node's over-committed units: find the named pods that reached it around Tally (another "
             "scheduler, a preset spec.nodeName) and move or delete them, release the named GPUDevices, or repair "
             "the device that stopped serving; the finding clears when used + held fits what the node serves";
    case FindingCode::LedgerNotConfigured:
      return "configure the reservation ledger on tally-controller, tally-extender and tallyctl (--ledger-dir DIR "
             "or --ledger-configmap NAMESPACE/NAME), or remove the reservation add-on from the organization";
    case FindingCode::UnorganizedGpuUse:
      return "move the named workloads into a namespace an Organization holds (or create the Organization that "
             "holds this namespace or an ancestor), list the namespace in --system-namespaces if it is the "
             "platform's own, or accept such use with --unorganized-gpu-namespaces=allow on tally-controller, "
             "tally-extender and tallyctl";
    case FindingCode::DraPoolIncomplete:
      return "let the DRA driver publish every ResourceSlice of the pool's newest generation (or fix its "
             "resourceSliceCount); until then the pool's devices count as unknown and no claim is admitted on them";
    case FindingCode::DevicePluginAndDra:
      return "serve the node's GPUs one way: remove the device plugin advertising the class's resource, or stop "
             "the DRA driver publishing them (one device counted by both is sold twice)";
  }
  return "see the finding's message";
}

namespace {

const Addon* findAddon(const Cluster& cluster, std::string_view id) {
  if (!cluster.plans) return nullptr;
  auto it = cluster.plans->addons.find(std::string(id));
  return it == cluster.plans->addons.end() ? nullptr : &it->second;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

void staleCapacity(const Cluster& cluster, const AuditOptions& options, std::vector<Finding>& out) {
  const Timestamp now = options.now.value_or(cluster.now);
  for (Kind kind : {Kind::Node, Kind::Pod, Kind::Namespace, Kind::DeviceClass, Kind::GpuDevice,
                    Kind::HierarchicalResourceQuota, Kind::Organization, Kind::BillingPlans, Kind::Ledger,
                    Kind::ResourceSlice, Kind::ResourceClaim, Kind::DeviceTaintRule}) {
    std::string subject = fmt::format("cache/{}", toString(kind));
    const auto it = cluster.caches.find(kind);
    switch (sourceState(cluster, kind, now, options.staleAfterSeconds)) {
      case SourceState::NotConfigured:
      case SourceState::Current: break;
      case SourceState::Unsynced:
        out.push_back({FindingCode::StaleCapacity,
                       kind == Kind::Ledger ? "the reservation ledger is unknown (not read, or its last read failed): "
                                              "pending and active records cannot be seen"
                                            : fmt::format("the {} cache is not synced", toString(kind)),
                       subject});
        break;
      case SourceState::Stale:
        out.push_back({FindingCode::StaleCapacity,
                       fmt::format("the {} cache was last confirmed {}s ago (bound {}s)", toString(kind),
                                   now - it->second.lastSynced, options.staleAfterSeconds),
                       subject});
        break;
    }
  }
}

void ledgerFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  std::map<std::string, int> ids;
  for (const auto& r : cluster.ledger.records) ids[r.id]++;
  for (const auto& inv : cluster.ledger.invalid) {
    if (!inv.id.empty()) ids[inv.id]++;
  }
  std::set<std::string> reported;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && ids[r.id] > 1 && reported.insert(r.id).second) {
      out.push_back({FindingCode::DuplicateReservationId,
                     fmt::format("reservation id {} appears {} times in the ledger", r.id, ids[r.id]),
                     "record/" + r.id});
    }
  }
  for (const auto& inv : cluster.ledger.invalid) {
    // A record that could not be attributed to a pool affects every pool.
    if (!inv.profileId.empty() && inv.profileId != pool.name) continue;
    std::string why = inv.problems.empty() ? "invalid" : inv.problems.front().message;
    out.push_back({FindingCode::InvalidRecord, fmt::format("ledger record {} is invalid: {}", inv.source, why),
                   "ledger/" + inv.source});
  }
  // The ledger's history (the source compares each revision with every record
  // it saw before): a vanished record is a missing record, a forbidden change an
  // invalid one. Both name the record and its file; one of no known pool
  // affects every pool.
  for (const auto& p : cluster.ledger.history) {
    if (!p.profileId.empty() && p.profileId != pool.name) continue;
    if (p.rule == LedgerRule::Disappeared) {
      out.push_back(
          {FindingCode::MissingLedgerRecord,
           fmt::format("ledger record {} ({}) was seen earlier and is missing: {}", p.id, p.source, p.message),
           "record/" + p.id});
    } else if (p.rule == LedgerRule::Transition) {
      out.push_back({FindingCode::InvalidRecord, fmt::format("ledger record {} ({}): {}", p.id, p.source, p.message),
                     "ledger/" + p.source});
    }
  }
  if (const auto& failed = cluster.ledger.readError) {
    out.push_back({FindingCode::InvalidRecord,
                   fmt::format("the reservation ledger cannot be read ({}: {}); the audit holds the last revision "
                               "read whole",
                               failed->source, failed->message),
                   "ledger/" + failed->source});
  }
  std::vector<std::string> inflight;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && inFlight(r.state))
      inflight.push_back(fmt::format("{} ({})", r.id, toString(r.state)));
  }
  if (inflight.size() > 1) {
    out.push_back({FindingCode::MultipleTransactions,
                   fmt::format("{} transactions in flight in pool {} (at most one): {}", inflight.size(), pool.name,
                               joined(inflight)),
                   "pool/" + pool.name});
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name || !holdsCapacity(r.state)) continue;
    if (auto wrong = reservationMismatch(cluster, r)) {
      out.push_back({FindingCode::ProfileModeMismatch, wrong->message, "record/" + r.id});
    }
  }
  // A reservation add-on of a pool that cannot be reserved sells a guarantee the
  // pool cannot give, whether or not an organization holds it yet.
  if (cluster.plans && (pool.allocation != Allocation::Passthrough || pool.workload != Workload::Vm)) {
    for (const auto& [id, addon] : cluster.plans->addons) {
      auto profile = reservationProfile(addon);
      if (profile && *profile == pool.name && !addon.disabled) {
        out.push_back(
            {FindingCode::ProfileModeMismatch,
             fmt::format("add-on {} is an operator-only reservation add-on of {}, a {} pool: only whole-device "
                         "VM profiles (passthrough) can be reserved",
                         id, pool.name, toString(pool.allocation)),
             "addon/" + id});
      }
    }
  }
}

void addonFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  for (const auto& [key, org] : cluster.organizations) {
    for (const auto& a : org.addons) {
      const Addon* addon = findAddon(cluster, a.addonId);
      if (!addon) {
        // An add-on nobody can attribute may grant anything: every pool fails.
        out.push_back({FindingCode::UnknownAddon,
                       fmt::format("organization {} is assigned add-on {} x{}, which billing-plans does not define",
                                   org.name, a.addonId, a.quantity),
                       fmt::format("organization/{}/addon/{}", org.name, a.addonId)});
        continue;
      }
      if (!addon->disabled && a.quantity != 0) {
        for (const auto& [profile, grant] : addon->gpu) {
          if (detail::findClass(cluster, profile)) continue;
          // Quota of a profile no pool sells cannot be put in any equation.
          out.push_back({FindingCode::UnattributedQuantity,
                         fmt::format("organization {} is assigned add-on {} x{}, which grants profile {}; no "
                                     "GPUDeviceClass is named {}",
                                     org.name, a.addonId, a.quantity, profile, profile),
                         fmt::format("addon/{}/profile/{}", a.addonId, profile)});
        }
      }
    }
  }
  // A reservation add-on is accounted for by the ledger alone: without one
  // configured the pool fails closed and says which flag is missing; a pool
  // whose organizations hold none is not affected.
  const bool noLedger = !cluster.configured(Kind::Ledger);
  for (const auto& held : heldReservations(cluster, pool)) {
    const std::string subject = fmt::format("organization/{}/addon/{}", held.organization, held.addonId);
    if (noLedger) {
      out.push_back({FindingCode::LedgerNotConfigured,
                     fmt::format("organization {} holds reservation add-on {} for {} device(s) of {} but no "
                                 "reservation ledger is configured ({}): its records cannot be read",
                                 held.organization, held.addonId, held.devices, pool.name, kLedgerFlags),
                     subject});
      continue;
    }
    std::int64_t recorded = 0;
    // Pending, active and releasing records all keep their entitlement.
    for (const auto& r : cluster.ledger.records) {
      if (r.organization == held.organization && r.profileId == pool.name && r.addonId == held.addonId &&
          holdsCapacity(r.state)) {
        recorded += r.devices;
      }
    }
    if (held.devices > recorded) {
      out.push_back({FindingCode::MissingLedgerRecord,
                     fmt::format("organization {} holds reservation add-on {} for {} device(s) of {} but the ledger "
                                 "has pending/active/releasing records for {}",
                                 held.organization, held.addonId, held.devices, pool.name, recorded),
                     subject});
    }
  }
}

// A DRA pool's own findings: pools not complete, tainted devices, and nodes
// serving the class's resource by a device plugin too.
void draFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  std::set<std::string> unknown;
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    DraNodeUnits units = draUnitsOn(node, pool);
    for (const auto& u : units.unknown) {
      if (unknown.insert(u).second) {
        out.push_back({FindingCode::DraPoolIncomplete,
                       fmt::format("pool {}: {}, so node {}'s devices count as unknown", pool.name, u, name),
                       "node/" + name});
      }
    }
    if (!units.unhealthy.empty()) {
      out.push_back({FindingCode::DegradedHealth,
                     fmt::format("node {} of pool {} has {} tainted device(s): {}", name, pool.name,
                                 units.unhealthyDevices, joined(units.unhealthy)),
                     "node/" + name});
    }
    if (node.allocatable.get(pool.resourceName) > 0 || node.capacity.get(pool.resourceName) > 0) {
      out.push_back(
          {FindingCode::DevicePluginAndDra,
           fmt::format("node {} advertises {} {} by a device plugin and driver {} publishes devices of "
                       "pool {} there: the same GPUs would be counted twice",
                       name, node.allocatable.get(pool.resourceName), pool.resourceName, pool.dra->driver, pool.name),
           "node/" + name});
    }
  }
}

void modeFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  std::string subject = "gpudeviceclass/" + pool.name;
  if (pool.dra) {
    // A DRA pool is wherever its driver publishes: no node mode, any workload
    // (pods and KubeVirt VMs claim devices alike), no permittedHostDevices.
    draFindings(cluster, pool, out);
    return;
  }
  if (pool.nodeMode != defaultNodeMode(pool.allocation)) {
    out.push_back(
        {FindingCode::ProfileModeMismatch,
         fmt::format("class {} has allocation {} but node mode '{}' (expected '{}')", pool.name,
                     toString(pool.allocation), toString(pool.nodeMode), toString(defaultNodeMode(pool.allocation))),
         subject});
  }
  if ((pool.workload == Workload::Vm) != (pool.allocation != Allocation::Shared)) {
    out.push_back({FindingCode::ProfileModeMismatch,
                   fmt::format("class {} sells workload {} with allocation {}", pool.name, toString(pool.workload),
                               toString(pool.allocation)),
                   subject});
  }
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    if (node.activeMode != node.expectedMode && node.expectedMode != NodeMode::Unset) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("node {} of pool {} is in mode '{}' but expected '{}'", name, pool.name,
                                 toString(node.activeMode), toString(node.expectedMode)),
                     "node/" + name});
    }
    if (pool.allocation == Allocation::Shared && !node.inventory) {
      out.push_back({FindingCode::SharedNodeWithoutInventory,
                     fmt::format("node {} is in pool {} without a {} annotation and serves no shared units", name,
                                 pool.name, kAnnotationInventory),
                     "node/" + name});
    }
  }
  if (pool.workload == Workload::Vm && cluster.permittedHostDevices) {
    const auto& permitted = *cluster.permittedHostDevices;
    auto it = std::find_if(permitted.begin(), permitted.end(),
                           [&](const PermittedHostDevice& p) { return p.resourceName == pool.resourceName; });
    if (it == permitted.end()) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("KubeVirt does not permit host device {} of class {}", pool.resourceName, pool.name),
                     subject});
    } else if (pool.allocation == Allocation::Passthrough && !pool.pciVendorSelector.empty() &&
               it->selector != pool.pciVendorSelector) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("class {} selects PCI {} but KubeVirt permits {} as {}", pool.name,
                                 pool.pciVendorSelector, pool.resourceName, it->selector),
                     subject});
    }
  }
}

// The seed's stop conditions on the pool's nodes: both device plugins present,
// and degraded health.
void healthFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  auto advertisesMore = [](const Node& node, std::string_view resource) {
    return node.allocatable.get(resource) > 0 || node.capacity.get(resource) > 0;
  };
  std::set<std::string> vmResources, sharedResources;
  for (const auto& [name, cls] : cluster.classes) {
    (cls.allocation == Allocation::Shared ? sharedResources : vmResources).insert(cls.resourceName);
  }
  sharedResources.insert("nvidia.com/gpu");
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    std::vector<std::string> vm, shared;
    for (const auto& r : vmResources) {
      if (advertisesMore(node, r) && !sharedResources.contains(r)) vm.push_back(r);
    }
    for (const auto& r : sharedResources) {
      if (advertisesMore(node, r)) shared.push_back(r);
    }
    if (!vm.empty() && !shared.empty()) {
      out.push_back(
          {FindingCode::BothDevicePlugins,
           fmt::format("node {} of pool {} advertises both {} (VM devices) and {} (HAMi): both device plugins "
                       "are present",
                       name, pool.name, joined(vm), joined(shared)),
           "node/" + name});
    }
    std::int64_t capacity = node.capacity.get(pool.resourceName);
    std::int64_t allocatable = node.allocatable.get(pool.resourceName);
    if (node.capacity.contains(pool.resourceName) && capacity > allocatable) {
      out.push_back({FindingCode::DegradedHealth,
                     fmt::format("node {} of pool {} has {} {} in capacity but only {} allocatable: {} device(s) are "
                                 "unhealthy",
                                 name, pool.name, capacity, pool.resourceName, allocatable, capacity - allocatable),
                     "node/" + name});
    }
    if (node.inventory) {
      std::vector<std::string> unhealthy;
      for (const auto& parent : *node.inventory) {
        if (!parent.healthy) unhealthy.push_back(parent.id.empty() ? "<unnamed>" : parent.id);
      }
      if (!unhealthy.empty()) {
        out.push_back({FindingCode::DegradedHealth,
                       fmt::format("node {} of pool {} reports {} unhealthy GPU parent(s) in {}", name, pool.name,
                                   unhealthy.size(), kAnnotationInventory),
                       "node/" + name});
      }
    }
  }
}

void statusFindings(const Cluster& cluster, const DeviceClass& pool, const CapacityView& usage,
                    std::vector<Finding>& out) {
  const std::string key = quotaKey(pool.resourceName);
  const auto sharing = classesFor(cluster, pool.resourceName);
  for (const auto& [k, org] : cluster.organizations) {
    const HierarchicalResourceQuota* hrq = organizationQuota(cluster, org);
    std::string hrqName = fmt::format("hrq/{}/{}", org.ns, kOrgQuotaName);
    if (!hrq) {
      if (grantsInPool(cluster, org, pool)) {
        out.push_back(
            {FindingCode::QuotaUnknown,
             fmt::format("organization {} holds add-ons granting {} but its HRQ {}/{} cannot be read: its hard "
                         "quota in pool {} is unknown, not 0",
                         org.name, key, org.ns, kOrgQuotaName, pool.name),
             hrqName});
      }
    } else {
      std::int64_t hard = hrq->hard.get(key);
      std::int64_t granted = grantedQuota(cluster, org).get(key);
      // HNC limits nothing an HRQ does not name: the tenant's use of the pool
      // is bounded by no quota and counted in no term of the invariant.
      if (!hrq->hard.contains(key)) {
        if (std::int64_t used = usage.subtreeUsed(org.ns, key); used > 0) {
          out.push_back(
              {FindingCode::UnattributedQuantity,
               fmt::format("HRQ {}/{} sets no hard quota for {} but organization {}'s namespaces use {} unit(s) of "
                           "it: that use is bounded by no quota and counted in no term of pool {}'s invariant",
                           hrq->ns, hrq->name, key, org.name, used, pool.name),
               hrqName + "/" + key});
        }
      }
      if (hard > granted) {
        out.push_back(
            {FindingCode::UnattributedQuantity,
             fmt::format("HRQ {}/{} has hard {} {} but organization {}'s add-ons grant {}: {} unit(s) no add-on "
                         "explains",
                         hrq->ns, hrq->name, hard, key, org.name, granted, hard - granted),
             hrqName});
      }
      if (hrq->hard.contains(key) && hrq->statusHard.get(key) != hard) {
        out.push_back(
            {FindingCode::StatusDisagreement,
             fmt::format("HRQ {}/{} has spec.hard {} {} but status.hard {}{}", hrq->ns, hrq->name, hard, key,
                         hrq->statusHard.get(key), hrq->statusHard.contains(key) ? "" : " (HNC has not reported it)"),
             hrqName + "/status"});
      }
      // A status without the pool's profile reports nothing, which disagrees
      // with any hard quota the HRQ sets for it.
      std::optional<HardUsed> reported;
      if (auto status = org.acceleratorStatus.find(pool.name); status != org.acceleratorStatus.end()) {
        reported = pool.allocation == Allocation::Shared ? status->second.shares : status->second.devices;
      }
      if (sharing.size() == 1 && (reported ? reported->hard != hard : hard != 0)) {
        out.push_back(
            {FindingCode::StatusDisagreement,
             reported ? fmt::format("organization {} status reports hard {} for {} but HRQ {}/{} has {} for {}",
                                    org.name, reported->hard, pool.name, hrq->ns, hrq->name, hard, key)
                      : fmt::format("organization {} status reports no hard quota for {} but HRQ {}/{} has {} for {}",
                                    org.name, pool.name, hrq->ns, hrq->name, hard, key),
             "organization/" + org.name + "/status"});
      }
    }
    // An active record needs its own reservation add-on's grant, not just any hard quota.
    std::map<std::string, std::int64_t> activeByAddon;
    for (const auto& r : cluster.ledger.records) {
      if (r.organization == org.name && r.profileId == pool.name && r.state == ReservationState::Active) {
        activeByAddon[r.addonId] += r.devices;
      }
    }
    for (const auto& [addonId, devices] : activeByAddon) {
      std::int64_t grant = 0;
      const Addon* addon = findAddon(cluster, addonId);
      for (const auto& a : org.addons) {
        if (a.addonId != addonId || !addon || addon->disabled) continue;
        auto it = addon->gpu.find(pool.name);
        if (it != addon->gpu.end()) grant += a.quantity * it->second.devices;
      }
      if (grant < devices) {
        out.push_back(
            {FindingCode::StatusDisagreement,
             fmt::format("organization {} has {} active reserved device(s) of {} under add-on {} but that add-on "
                         "grants it {}",
                         org.name, devices, pool.name, addonId, grant),
             fmt::format("organization/{}/addon/{}", org.name, addonId)});
      }
    }
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && r.state == ReservationState::Active &&
        !detail::findOrganization(cluster, r.organization)) {
      out.push_back({FindingCode::StatusDisagreement,
                     fmt::format("active record {} names organization {}, which does not exist", r.id, r.organization),
                     "record/" + r.id});
    }
  }
}

void overcommitFindings(const Cluster& cluster, const DeviceClass& pool, const CapacityView& view,
                        std::vector<Finding>& out) {
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    if (auto over = nodeOvercommit(cluster, node, pool, view)) {
      out.push_back(
          {FindingCode::NodeOvercommitted, fmt::format("pool {}: {}", pool.name, over->message()), "node/" + name});
    }
  }
}

// GPU use of the pool in namespaces no Organization holds, where the policy
// refuses it (a pod created before the policy, or placed around the doors).
void unorganizedFindings(const Cluster& cluster, const DeviceClass& pool, const CapacityView& usage,
                         std::vector<Finding>& out) {
  const std::string key = quotaKey(pool.resourceName);
  for (const auto& [name, ns] : cluster.namespaces) {
    std::int64_t used = usage.namespaceUsed(name, key);
    if (used <= 0) continue;
    if (auto why = unattributedNamespace(cluster, name)) {
      out.push_back({FindingCode::UnorganizedGpuUse,
                     fmt::format("pool {}: namespace {} uses {} unit(s) of {}, which no tenant's quota counts: {}",
                                 pool.name, name, used, key, *why),
                     "namespace/" + name});
    }
  }
}

std::uint64_t fnv1a(std::string_view text, std::uint64_t hash = 1469598103934665603ULL) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace

std::vector<Finding> auditPool(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& options) {
  std::vector<Finding> out;
  staleCapacity(cluster, options, out);
  PoolInvariant inv = evaluateInvariant(cluster, pool);
  if (inv.unknown.empty() && !inv.holds()) {
    out.push_back(
        {FindingCode::HardQuotaAboveCapacity, "capacity invariant fails: " + inv.equation(), "pool/" + pool.name});
  }
  std::optional<TotalsCapacityView> recomputed;
  const CapacityView* usage = options.usage;
  if (!usage) usage = &recomputed.emplace(cluster, computeUsage(cluster));
  overcommitFindings(cluster, pool, *usage, out);
  unorganizedFindings(cluster, pool, *usage, out);
  ledgerFindings(cluster, pool, out);
  addonFindings(cluster, pool, out);
  modeFindings(cluster, pool, out);
  healthFindings(cluster, pool, out);
  for (const auto& alert : cluster.alerts) {
    if (alert.pool.empty() || alert.pool == pool.name) {
      out.push_back({FindingCode::ActiveAlert, fmt::format("alert {} is firing", alert.name), "alert/" + alert.name});
    }
  }
  statusFindings(cluster, pool, *usage, out);
  const Timestamp now = options.now.value_or(cluster.now);
  for (auto& f : out) {
    if (!convergent(f.code)) continue;
    Timestamp since = now;
    if (options.firstSeen) {
      auto it = options.firstSeen->find(findingKey(f));
      if (it != options.firstSeen->end()) since = it->second;
    }
    f.converging = !options.firstSeen || now - since < options.convergenceSeconds;
  }
  return out;
}

std::string failureId(const DeviceClass& pool, const std::vector<Finding>& findings, Timestamp now) {
  std::set<std::string> parts;
  for (const auto& f : findings) {
    if (failsClosed(f.code) && !f.converging) parts.insert(findingKey(f));
  }
  std::uint64_t hash = fnv1a(pool.name);
  for (const auto& p : parts) hash = fnv1a(p, fnv1a("\n", hash));
  std::string digest = fmt::format("{}-{:08x}-", pool.name, static_cast<std::uint32_t>(hash ^ (hash >> 32)));
  // The same failure still going on keeps the id it was published with.
  if (!pool.gateOpen && pool.gateFailureId.starts_with(digest)) return pool.gateFailureId;
  return digest + std::to_string(now);
}

GateState evaluateGate(const Cluster& cluster, const DeviceClass& pool, const std::vector<Finding>& findings) {
  GateState gate;
  std::vector<const Finding*> failing, converging;
  for (const auto& f : findings) {
    if (failsClosed(f.code)) (f.converging ? converging : failing).push_back(&f);
  }
  if (!failing.empty()) {
    gate.open = false;
    gate.failureId = failureId(pool, findings, cluster.now);
    gate.why = GateReason::AuditFailed;
    gate.reason = fmt::format("{} failing finding(s), first: {}: {}", failing.size(), toString(failing.front()->code),
                              failing.front()->message);
    return gate;
  }
  if (!pool.gateOpen && !pool.gateFailureId.empty()) {
    std::set<std::string> products, sres;
    for (const auto& ack : pool.acknowledgements) {
      if (ack.failureId != pool.gateFailureId || ack.identity.empty()) continue;
      if (ack.role == "product") products.insert(ack.identity);
      if (ack.role == "sre") sres.insert(ack.identity);
    }
    // Two people: some product identity and some sre identity that differs from it.
    bool pair = std::any_of(products.begin(), products.end(), [&](const std::string& p) {
      return std::any_of(sres.begin(), sres.end(), [&](const std::string& s) { return s != p; });
    });
    if (!pair) {
      gate.open = false;
      gate.failureId = pool.gateFailureId;
      std::string missing = products.empty() && sres.empty() ? "product and sre"
                            : products.empty()               ? "product"
                            : sres.empty()                   ? "sre"
                                                             : "product and sre by two different identities";
      gate.why = GateReason::AwaitingAcknowledgement;
      gate.reason =
          fmt::format("findings cleared; failure {} awaits acknowledgement by {}", pool.gateFailureId, missing);
      return gate;
    }
    gate.reason = fmt::format("findings cleared and failure {} acknowledged by product and sre", pool.gateFailureId);
  }
  if (!converging.empty()) {
    gate.open = false;
    gate.converging = true;
    gate.why = GateReason::Converging;
    gate.reason = fmt::format("{} finding(s) still converging, first: {}: {}", converging.size(),
                              toString(converging.front()->code), converging.front()->message);
    return gate;
  }
  if (auto closed = closedBySpec(cluster, pool)) return *closed;
  gate.open = true;
  if (gate.reason.empty()) gate.reason = "audit clean";
  return gate;
}

std::optional<GateState> closedBySpec(const Cluster& cluster, const DeviceClass& pool) {
  GateState gate;
  gate.open = false;
  if (pool.creationPaused) {
    gate.paused = true;
    gate.why = GateReason::Paused;
    gate.reason = fmt::format("creation in pool {} is paused by the operator (spec.creationPaused)", pool.name);
    return gate;
  }
  if (pool.keepCreationOpenDuringTransactions) return std::nullopt;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name || !inFlight(r.state)) continue;
    gate.transaction = r.id;
    gate.why = GateReason::TransactionInFlight;
    gate.reason = fmt::format(
        "reservation {} of organization {} is {} in pool {}: creation stays closed until the "
        "transaction ends",
        r.id, r.organization, toString(r.state), pool.name);
    return gate;
  }
  return std::nullopt;
}

std::string_view toString(GateReason reason) {
  switch (reason) {
    case GateReason::Open: return "Open";
    case GateReason::AuditFailed: return "AuditFailed";
    case GateReason::AwaitingAcknowledgement: return "AwaitingAcknowledgement";
    case GateReason::Converging: return "Converging";
    case GateReason::Paused: return "Paused";
    case GateReason::TransactionInFlight: return "TransactionInFlight";
    case GateReason::NotAudited: return "NotAudited";
  }
  return "Unknown";
}

std::string_view toString(GateSource source) { return source == GateSource::Published ? "published" : "evaluated"; }

std::string notAuditedMessage(const DeviceClass& pool) {
  return fmt::format(
      "pool {} is not audited yet: no CreationOpen condition is published in its status (tally-controller's pool "
      "auditor decides it within seconds of starting; without an auditor the doors must evaluate the gate "
      "themselves)",
      pool.name);
}

namespace {
GateState gateFrom(const Cluster& cluster, const DeviceClass& pool, GateSource source, const AuditOptions& audit) {
  GateState gate;
  if (source == GateSource::Evaluated) return evaluateGate(cluster, pool, auditPool(cluster, pool, audit));
  if (!pool.gateDecided) {
    gate.open = false;
    gate.undecided = true;
    gate.why = GateReason::NotAudited;
    gate.reason = notAuditedMessage(pool);
    return gate;
  }
  gate.open = pool.gateOpen;
  gate.failureId = pool.gateFailureId;
  gate.reason = pool.gateReason;
  // A published closed gate names its failure (AuditFailed, or awaiting its
  // acknowledgement) or is closed by the spec, which closedBySpec tells again.
  gate.why = gate.open ? GateReason::Open : GateReason::AuditFailed;
  if (!gate.open) {
    if (auto closed = closedBySpec(cluster, pool); closed && gate.failureId.empty()) gate.why = closed->why;
    return gate;
  }
  if (auto closed = closedBySpec(cluster, pool)) gate = std::move(*closed);
  return gate;
}
}  // namespace

GateState doorGate(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& audit) {
  return gateFrom(cluster, pool, cluster.gates, audit);
}

std::map<std::string, GateState> doorGates(const Cluster& cluster, GateSource source, const AuditOptions& audit) {
  std::map<std::string, GateState> gates;
  for (const auto& [name, pool] : cluster.classes) gates[name] = gateFrom(cluster, pool, source, audit);
  return gates;
}

void applyDoorGates(Cluster& cluster, const std::map<std::string, GateState>& gates) {
  for (auto& [name, pool] : cluster.classes) {
    auto it = gates.find(name);
    if (it == gates.end()) continue;
    pool.gateDecided = true;
    pool.gateOpen = it->second.open;
    pool.gateFailureId = it->second.failureId;
    pool.gateReason = it->second.reason;
  }
}

std::string gateClosedMessage(const DeviceClass& pool) {
  if (!pool.gateFailureId.empty()) {
    return fmt::format("creation in pool {} is closed by a failed audit ({}); existing holders keep their GPUs",
                       pool.name, pool.gateFailureId);
  }
  return fmt::format("creation in pool {} is closed{}; existing holders keep their GPUs", pool.name,
                     pool.gateReason.empty() ? "" : ": " + pool.gateReason);
}

std::map<std::string, Timestamp> settleFindings(const std::vector<Finding>& findings,
                                                const std::map<std::string, Timestamp>& before, Timestamp now) {
  std::map<std::string, Timestamp> seen;
  for (const auto& f : findings) {
    const std::string key = findingKey(f);
    auto it = before.find(key);
    seen.emplace(key, it == before.end() ? now : it->second);
  }
  return seen;
}

std::vector<std::string> stuckReleases(const Cluster& cluster, const std::string& pool,
                                       std::map<std::string, Timestamp>& firstSeen, Timestamp now,
                                       std::int64_t afterSeconds) {
  std::set<std::string> releasing;
  std::vector<std::string> stuck;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool || r.state != ReservationState::Releasing) continue;
    releasing.insert(r.id);
    auto [it, added] = firstSeen.emplace(r.id, now);
    Timestamp since = it->second;
    if (r.endsAt && *r.endsAt < since) since = *r.endsAt;
    if (now - since > afterSeconds) stuck.push_back(r.id);
  }
  std::erase_if(firstSeen, [&](const auto& kv) { return !releasing.contains(kv.first); });
  return stuck;
}

std::optional<Timestamp> auditDue(const Cluster& cluster, const std::vector<Finding>& findings, Timestamp now,
                                  const AuditOptions& options, const AuditSchedule& schedule) {
  std::optional<Timestamp> due;
  const auto earliest = [&](Timestamp t) { due = due ? std::min(*due, t) : t; };
  if (schedule.firstSeen) {
    for (const auto& f : findings) {
      if (!f.converging) continue;
      auto it = schedule.firstSeen->find(findingKey(f));
      const Timestamp since = it == schedule.firstSeen->end() ? now : it->second;
      earliest(since + options.convergenceSeconds + 1);
    }
  }
  // No event says that nothing was heard: a cache confirmed current long
  // before is looked at again when it would become stale.
  for (const auto& [kind, cache] : cluster.caches) {
    const Timestamp stale = cache.lastSynced + options.staleAfterSeconds + 1;
    if (cache.synced && cache.configured && stale > now) earliest(stale);
  }
  if (schedule.releasingSince) {
    for (const auto& [id, since] : *schedule.releasingSince) {
      if (schedule.reported && schedule.reported->contains(id)) continue;
      earliest(since + schedule.releaseStuckAfter + 1);
    }
  }
  return due;
}

}  // namespace tally::model
