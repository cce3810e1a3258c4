#include "tally/model/capacity.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "lookup.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/units.hpp"

namespace tally::model {

TotalsCapacityView::TotalsCapacityView(const Cluster& cluster, UsageTotals totals)
    : cluster_(&cluster), totals_(std::move(totals)), reader_(cluster, totals_) {
  for (const auto& [ns, placed] : totals_.namespacePlaced) {
    for (const auto& ancestor : detail::chainOf(cluster, ns)) {
      for (const auto& [r, a] : placed) placedSubtree_[ancestor].add(r, a);
    }
  }
}

std::int64_t TotalsCapacityView::subtreePlaced(std::string_view ns, std::string_view resource) const {
  auto it = placedSubtree_.find(ns);
  return it == placedSubtree_.end() ? 0 : it->second.get(resource);
}

bool TotalsCapacityView::counts(const Pod& pod) const {
  auto it = cluster_->pods.find(objectKey(pod.ns, pod.name));
  return it != cluster_->pods.end() && it->second.uid == pod.uid && !isTerminal(it->second);
}

std::int64_t TotalsCapacityView::nodeUsed(std::string_view node, std::string_view resource) const {
  auto it = totals_.nodeUsed.find(std::string(node));
  return it == totals_.nodeUsed.end() ? 0 : it->second.get(resource);
}

std::int64_t TotalsCapacityView::nodeHeld(std::string_view node, std::string_view resource) const {
  auto it = totals_.nodeHeld.find(std::string(node));
  return it == totals_.nodeHeld.end() ? 0 : it->second.get(resource);
}

std::int64_t TotalsCapacityView::subtreeUsed(std::string_view ns, std::string_view key) const {
  return reader_.subtreeUsed(ns, key);
}

std::int64_t TotalsCapacityView::namespaceUsed(std::string_view ns, std::string_view key) const {
  return reader_.namespaceUsed(ns, key);
}

std::int64_t freeUnits(const Node& node, const DeviceClass& cls, const CapacityView& view) {
  NodeUnits served = unitsServed(node, cls);
  return std::max<std::int64_t>(0, served.units - view.nodeUsed(node.name, cls.resourceName));
}

std::string NodeOvercommit::message() const {
  std::string out = fmt::format(
      "node {} serves {} unit(s) but {} are in use ({} held by GPUDevices, {} by pods, ResourceClaims or "
      "assumed placements): over-committed by {}",
      node, served, used, held, used - held, used - served);
  auto list = [](const std::vector<std::string>& items) {
    std::string text;
    for (const auto& i : items) text += (text.empty() ? "" : ", ") + i;
    return text;
  };
  if (!devices.empty()) out += "; devices: " + list(devices);
  if (!pods.empty()) out += "; pods: " + list(pods);
  if (!claims.empty()) out += "; resourceclaims: " + list(claims);
  return out;
}

std::optional<NodeOvercommit> nodeOvercommit(const Cluster& cluster, const Node& node, const DeviceClass& cls,
                                             const CapacityView& view) {
  if (nodeIneligibility(node, cls)) return std::nullopt;
  NodeOvercommit out;
  out.node = node.name;
  out.served = unitsServed(node, cls).units;
  out.used = view.nodeUsed(node.name, cls.resourceName);
  if (out.used <= out.served) return std::nullopt;
  out.held = view.nodeHeld(node.name, cls.resourceName);
  for (const auto& [key, device] : cluster.devices) {
    DeviceUsage usage = deviceUsage(device, cluster);
    const std::int64_t units = usage.capacity.get(cls.resourceName);
    if (usage.node == node.name && units > 0) out.devices.push_back(fmt::format("{} ({})", key, units));
  }
  ClusterLaunchFacts facts(cluster);
  for (const auto& [key, pod] : cluster.pods) {
    if (pod.nodeName != node.name) continue;
    PodUsage usage = podUsage(pod, launchOf(pod, facts), cluster);
    const std::int64_t units = usage.capacity.get(cls.resourceName);
    if (units > 0) out.pods.push_back(fmt::format("{} ({})", key, units));
  }
  for (const auto& [key, claim] : cluster.resourceClaims) {
    ClaimUsage usage = claimUsage(cluster, claim);
    const std::int64_t units = usage.capacity.get(cls.resourceName);
    if (usage.node == node.name && units > 0) out.claims.push_back(fmt::format("{} ({})", key, units));
  }
  return out;
}

const DeviceClass* classServing(const Cluster& cluster, const Node& node, std::string_view resource) {
  NodeMode mode = poolMode(node);
  for (const auto& [name, cls] : cluster.classes) {
    // A DRA class naming no mode serves on any node its driver publishes.
    const bool modeFits = cls.nodeMode == mode || (cls.dra && cls.nodeMode == NodeMode::Unset);
    if (cls.resourceName == resource && modeFits) return &cls;
  }
  return nullptr;
}

std::vector<const DeviceClass*> classesFor(const Cluster& cluster, std::string_view resource) {
  std::vector<const DeviceClass*> out;
  for (const auto& [name, cls] : cluster.classes) {
    if (cls.resourceName == resource) out.push_back(&cls);
  }
  return out;
}

std::int64_t idleReservedByOthers(const Cluster& cluster, const CapacityView& view, const DeviceClass& pool,
                                  const Organization* org) {
  std::map<std::string, std::int64_t> reservedByOrg;
  for (const auto& r : cluster.ledger.records) {
    // A release in progress still holds its capacity until it is released.
    bool holds = r.state == ReservationState::Active || r.state == ReservationState::Releasing;
    if (!holds || r.profileId != pool.name) continue;
    if (org && r.organization == org->name) continue;
    reservedByOrg[r.organization] += r.devices * unitsPerDevice(pool);
  }
  std::int64_t idle = 0;
  for (const auto& [orgName, reserved] : reservedByOrg) {
    const Organization* holder = detail::findOrganization(cluster, orgName);
    std::int64_t used = holder ? view.subtreePlaced(holder->ns, pool.resourceName) : 0;
    idle += std::max<std::int64_t>(0, reserved - used);
  }
  return idle;
}

}  // namespace tally::model

namespace tally::model {

std::int64_t CapacityView::pendingClaimUnits(const Cluster& cluster, const DeviceClass& pool) const {
  std::int64_t units = 0;
  for (const auto& [key, claim] : cluster.resourceClaims) units += claimPendingUnits(cluster, claim).get(pool.name);
  return units;
}

std::optional<ResourceList> CapacityView::claimAsks(const ClusterObjects& cluster, std::string_view claimKey) const {
  auto it = cluster.resourceClaims.find(std::string(claimKey));
  if (it == cluster.resourceClaims.end()) return std::nullopt;
  return claimPendingUnits(cluster, it->second);
}

std::int64_t CapacityView::poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const {
  std::int64_t free = 0;
  for (const auto& [name, node] : cluster.nodes) {
    if (inPool(node, pool)) free += freeUnits(node, pool, *this);
  }
  return free;
}

}  // namespace tally::model
