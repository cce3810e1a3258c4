#include "tally/model/audit.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>

#include "lookup.hpp"
#include "tally/model/capacity.hpp"
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
    case FindingCode::SharedNodeWithoutInventory: return "SharedNodeWithoutInventory";
  }
  return "Unknown";
}

bool failsClosed(FindingCode code) { return code != FindingCode::SharedNodeWithoutInventory; }

namespace {

void staleCapacity(const Cluster& cluster, const AuditOptions& options, std::vector<Finding>& out) {
  for (Kind kind : {Kind::Node, Kind::Pod, Kind::DeviceClass, Kind::GpuDevice, Kind::HierarchicalResourceQuota,
                    Kind::Organization, Kind::BillingPlans, Kind::Ledger}) {
    auto it = cluster.caches.find(kind);
    if (it == cluster.caches.end() || !it->second.synced) {
      out.push_back({FindingCode::StaleCapacity, fmt::format("the {} cache is not synced", toString(kind))});
    } else if (cluster.now - it->second.lastSynced > options.staleAfterSeconds) {
      out.push_back({FindingCode::StaleCapacity,
                     fmt::format("the {} cache was last confirmed {}s ago (bound {}s)", toString(kind),
                                 cluster.now - it->second.lastSynced, options.staleAfterSeconds)});
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
                     fmt::format("reservation id {} appears {} times in the ledger", r.id, ids[r.id])});
    }
  }
  for (const auto& inv : cluster.ledger.invalid) {
    // A record that could not be attributed to a pool affects every pool.
    if (!inv.profileId.empty() && inv.profileId != pool.name) continue;
    std::string why = inv.problems.empty() ? "invalid" : inv.problems.front().message;
    out.push_back({FindingCode::InvalidRecord, fmt::format("ledger record {} is invalid: {}", inv.source, why)});
  }
  std::vector<std::string> inflight;
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && inFlight(r.state)) inflight.push_back(fmt::format("{} ({})", r.id, toString(r.state)));
  }
  if (inflight.size() > 1) {
    std::string names;
    for (const auto& n : inflight) names += (names.empty() ? "" : ", ") + n;
    out.push_back({FindingCode::MultipleTransactions,
                   fmt::format("{} transactions in flight in pool {} (at most one): {}", inflight.size(), pool.name, names)});
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId != pool.name) continue;
    if (pool.workload != Workload::Vm || pool.allocation == Allocation::Shared) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("record {} reserves profile {}, which is not a whole-device VM profile", r.id, pool.name)});
    }
  }
}

void addonFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  for (const auto& [key, org] : cluster.organizations) {
    for (const auto& a : org.addons) {
      const Addon* addon = nullptr;
      if (cluster.plans) {
        auto it = cluster.plans->addons.find(a.addonId);
        if (it != cluster.plans->addons.end()) addon = &it->second;
      }
      if (!addon) {
        // An add-on nobody can attribute may grant anything: every pool fails.
        out.push_back({FindingCode::UnknownAddon,
                       fmt::format("organization {} is assigned add-on {} x{}, which billing-plans does not define",
                                   org.name, a.addonId, a.quantity)});
        continue;
      }
      auto profile = reservationProfile(*addon);
      if (!profile || *profile != pool.name || a.quantity <= 0) continue;
      std::int64_t granted = a.quantity * addon->gpu.begin()->second.devices;
      std::int64_t recorded = 0;
      for (const auto& r : cluster.ledger.records) {
        if (r.organization == org.name && r.profileId == pool.name && r.addonId == a.addonId && holdsCapacity(r.state)) {
          recorded += r.devices;
        }
      }
      // A record being released keeps its entitlement until the add-on is removed.
      for (const auto& r : cluster.ledger.records) {
        if (r.organization == org.name && r.profileId == pool.name && r.addonId == a.addonId &&
            r.state == ReservationState::Releasing) {
          recorded += r.devices;
        }
      }
      if (granted > recorded) {
        out.push_back({FindingCode::MissingLedgerRecord,
                       fmt::format("organization {} holds reservation add-on {} for {} device(s) of {} but the ledger "
                                   "has active/pending records for {}",
                                   org.name, a.addonId, granted, pool.name, recorded)});
      }
    }
  }
}

void modeFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  if (pool.nodeMode != defaultNodeMode(pool.allocation)) {
    out.push_back({FindingCode::ProfileModeMismatch,
                   fmt::format("class {} has allocation {} but node mode '{}' (expected '{}')", pool.name,
                               toString(pool.allocation), toString(pool.nodeMode),
                               toString(defaultNodeMode(pool.allocation)))});
  }
  if ((pool.workload == Workload::Vm) != (pool.allocation != Allocation::Shared)) {
    out.push_back({FindingCode::ProfileModeMismatch,
                   fmt::format("class {} sells workload {} with allocation {}", pool.name, toString(pool.workload),
                               toString(pool.allocation))});
  }
  for (const auto& [name, node] : cluster.nodes) {
    if (!inPool(node, pool)) continue;
    if (node.activeMode != node.expectedMode && node.expectedMode != NodeMode::Unset) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("node {} of pool {} is in mode '{}' but expected '{}'", name, pool.name,
                                 toString(node.activeMode), toString(node.expectedMode))});
    }
    if (pool.allocation == Allocation::Shared && !node.inventory) {
      out.push_back({FindingCode::SharedNodeWithoutInventory,
                     fmt::format("node {} is in pool {} without a {} annotation and serves no shared units", name,
                                 pool.name, kAnnotationInventory)});
    }
  }
  if (pool.workload == Workload::Vm && cluster.permittedHostDevices) {
    const auto& permitted = *cluster.permittedHostDevices;
    auto it = std::find_if(permitted.begin(), permitted.end(),
                           [&](const PermittedHostDevice& p) { return p.resourceName == pool.resourceName; });
    if (it == permitted.end()) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("KubeVirt does not permit host device {} of class {}", pool.resourceName, pool.name)});
    } else if (pool.allocation == Allocation::Passthrough && !pool.pciVendorSelector.empty() &&
               it->selector != pool.pciVendorSelector) {
      out.push_back({FindingCode::ProfileModeMismatch,
                     fmt::format("class {} selects PCI {} but KubeVirt permits {} as {}", pool.name,
                                 pool.pciVendorSelector, pool.resourceName, it->selector)});
    }
  }
}

void statusFindings(const Cluster& cluster, const DeviceClass& pool, std::vector<Finding>& out) {
  const std::string key = quotaKey(pool.resourceName);
  for (const auto& [k, org] : cluster.organizations) {
    const HierarchicalResourceQuota* hrq = organizationQuota(cluster, org);
    auto status = org.acceleratorStatus.find(pool.name);
    if (status != org.acceleratorStatus.end() && hrq) {
      const auto& usage = status->second;
      std::optional<HardUsed> reported = pool.allocation == Allocation::Shared ? usage.shares : usage.devices;
      std::int64_t hard = hrq->hard.get(key);
      if (reported && reported->hard != hard && classesFor(cluster, pool.resourceName).size() == 1) {
        out.push_back({FindingCode::StatusDisagreement,
                       fmt::format("organization {} status reports hard {} for {} but HRQ {}/{} has {} for {}", org.name,
                                   reported->hard, pool.name, hrq->ns, hrq->name, hard, key)});
      }
    }
    std::int64_t active = 0;
    for (const auto& r : cluster.ledger.records) {
      if (r.organization == org.name && r.profileId == pool.name && r.state == ReservationState::Active) active += r.devices;
    }
    if (active > 0) {
      std::int64_t hard = hrq ? hrq->hard.get(key) : 0;
      if (hard < active * unitsPerDevice(pool)) {
        out.push_back({FindingCode::StatusDisagreement,
                       fmt::format("organization {} has {} active reserved device(s) of {} but its HRQ hard {} is {}",
                                   org.name, active, pool.name, key, hard)});
      }
    }
  }
  for (const auto& r : cluster.ledger.records) {
    if (r.profileId == pool.name && r.state == ReservationState::Active && !detail::findOrganization(cluster, r.organization)) {
      out.push_back({FindingCode::StatusDisagreement,
                     fmt::format("active record {} names organization {}, which does not exist", r.id, r.organization)});
    }
  }
}

}  // namespace

std::vector<Finding> auditPool(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& options) {
  std::vector<Finding> out;
  staleCapacity(cluster, options, out);
  PoolInvariant inv = evaluateInvariant(cluster, pool);
  if (!inv.holds()) {
    out.push_back({FindingCode::HardQuotaAboveCapacity, "capacity invariant fails: " + inv.equation()});
  }
  ledgerFindings(cluster, pool, out);
  addonFindings(cluster, pool, out);
  modeFindings(cluster, pool, out);
  for (const auto& alert : cluster.alerts) {
    if (alert.pool.empty() || alert.pool == pool.name) {
      out.push_back({FindingCode::ActiveAlert, fmt::format("alert {} is firing", alert.name)});
    }
  }
  statusFindings(cluster, pool, out);
  return out;
}

GateState evaluateGate(const DeviceClass& pool, const std::vector<Finding>& findings, Timestamp now) {
  GateState gate;
  std::vector<const Finding*> failing;
  for (const auto& f : findings) {
    if (failsClosed(f.code)) failing.push_back(&f);
  }
  if (!failing.empty()) {
    gate.open = false;
    // Keep the failure id while the pool stays failed, so acknowledgements given
    // for it remain valid; a fresh failure gets a fresh id.
    gate.failureId = !pool.gateOpen && !pool.gateFailureId.empty() ? pool.gateFailureId
                                                                   : fmt::format("{}-{}", pool.name, now);
    gate.reason = fmt::format("{} failing finding(s), first: {}: {}", failing.size(), toString(failing.front()->code),
                              failing.front()->message);
    return gate;
  }
  if (pool.gateOpen || pool.gateFailureId.empty()) {
    gate.open = true;
    gate.reason = "audit clean";
    return gate;
  }
  std::set<std::string> identities;
  bool product = false, sre = false;
  for (const auto& ack : pool.acknowledgements) {
    if (ack.failureId != pool.gateFailureId || ack.identity.empty()) continue;
    if (ack.role == "product" && !product && !identities.contains(ack.identity)) {
      product = true;
      identities.insert(ack.identity);
    } else if (ack.role == "sre" && !sre && !identities.contains(ack.identity)) {
      sre = true;
      identities.insert(ack.identity);
    }
  }
  if (product && sre) {
    gate.open = true;
    gate.reason = fmt::format("findings cleared and failure {} acknowledged by product and sre", pool.gateFailureId);
    return gate;
  }
  gate.open = false;
  gate.failureId = pool.gateFailureId;
  gate.reason = fmt::format("findings cleared; failure {} awaits acknowledgement by {}", pool.gateFailureId,
                            !product && !sre ? "product and sre" : (!product ? "product" : "sre"));
  return gate;
}

}  // namespace tally::model
