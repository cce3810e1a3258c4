#include "tally/model/usage_records.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "tally/model/usage.hpp"
#include "tally/model/dra.hpp"

namespace tally::model {

std::string_view toString(HolderKind kind) {
  switch (kind) {
    case HolderKind::Pod: return "Pod";
    case HolderKind::GpuDevice: return "GPUDevice";
    case HolderKind::ResourceClaim: return "ResourceClaim";
  }
  return "Unknown";
}

std::optional<HolderKind> parseHolderKind(std::string_view text) {
  if (text == "Pod") return HolderKind::Pod;
  if (text == "GPUDevice") return HolderKind::GpuDevice;
  if (text == "ResourceClaim") return HolderKind::ResourceClaim;
  return std::nullopt;
}

namespace {

std::string classServing(const Cluster& cluster, std::string_view resource) {
  for (const auto& [name, cls] : cluster.classes) {
    if (cls.resourceName == resource) return name;
  }
  return {};
}

}  // namespace

std::vector<Holder> holdersAt(const Cluster& cluster) {
  std::vector<Holder> out;
  for (const auto& [key, device] : cluster.devices) {
    if (!holdsNodeUnits(device)) continue;
    for (const auto& [resource, units] : deviceUsage(device, cluster).capacity) {
      if (units <= 0) continue;
      out.push_back({HolderKind::GpuDevice, device.ns, device.name, device.uid, device.className, resource, units});
    }
  }
  LauncherIndex launchers(cluster);
  for (const auto& [key, pod] : cluster.pods) {
    if (isTerminal(pod) || pod.nodeName.empty()) continue;
    // A launcher's GPUs are its VMI's devices': podUsage leaves only what they do not cover.
    PodUsage usage = podUsage(pod, launchOf(pod, launchers), cluster);
    if (usage.node.empty()) continue;
    for (const auto& [resource, units] : usage.capacity) {
      if (units <= 0) continue;
      out.push_back({HolderKind::Pod, pod.ns, pod.name, pod.uid, classServing(cluster, resource), resource, units});
    }
  }
  // An allocated claim holds the units of its devices (its pod, which asks
  // for no device-plugin resource, holds none of them).
  for (const auto& [key, claim] : cluster.resourceClaims) {
    ClaimUsage usage = claimUsage(cluster, claim);
    if (usage.node.empty()) continue;
    for (const auto& [resource, units] : usage.capacity) {
      if (units <= 0) continue;
      out.push_back({HolderKind::ResourceClaim, claim.ns, claim.name, claim.uid, classServing(cluster, resource),
                     resource, units});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<UsageBucket> accrue(const std::vector<Holder>& holders, Timestamp from, Timestamp to) {
  std::vector<UsageBucket> out;
  for (Timestamp start = from; start < to;) {
    const Timestamp hour = hourOf(start);
    const Timestamp end = std::min(to, hour + kSecondsPerHour);
    for (const Holder& h : holders) {
      if (h.units > 0) out.push_back({hour, h, h.units * (end - start)});
    }
    start = end;
  }
  std::vector<UsageBucket> merged;
  mergeBuckets(merged, out);
  return merged;
}

void mergeBuckets(std::vector<UsageBucket>& into, const std::vector<UsageBucket>& more) {
  std::map<std::pair<Timestamp, Holder>, std::int64_t> sums;
  for (const UsageBucket& b : into) sums[{b.hour, b.holder}] += b.unitSeconds;
  for (const UsageBucket& b : more) sums[{b.hour, b.holder}] += b.unitSeconds;
  into.clear();
  into.reserve(sums.size());
  for (auto& [key, seconds] : sums) into.push_back({key.first, key.second, seconds});
}

std::vector<UsageBucket> bucketsIn(const std::vector<UsageBucket>& buckets, Timestamp since, Timestamp until) {
  std::vector<UsageBucket> out;
  for (const UsageBucket& b : buckets) {
    if (b.hour >= since && b.hour < until) out.push_back(b);
  }
  return out;
}

std::vector<BillingWindow> billingWindows(const Ledger& ledger, Timestamp since, Timestamp until, Timestamp now) {
  std::vector<BillingWindow> out;
  const Timestamp end = std::min(until, now);
  for (const ReservationRecord& r : ledger.records) {
    if (r.state == ReservationState::Pending || r.state == ReservationState::Canceled) continue;
    if (!r.activatedAt) continue;  // validation requires it past pending; without it nothing is billable
    BillingWindow w;
    w.id = r.id;
    w.organization = r.organization;
    w.project = r.project;
    w.profileId = r.profileId;
    w.addonId = r.addonId;
    w.billingReference = r.billingReference;
    w.state = r.state;
    w.devices = r.devices;
    w.open = !r.releasedAt.has_value();
    w.from = std::max(*r.activatedAt, since);
    w.until = r.releasedAt ? std::min(*r.releasedAt, end) : end;
    if (w.until <= w.from) continue;
    w.deviceSeconds = w.devices * (w.until - w.from);
    w.source = r.source;
    out.push_back(std::move(w));
  }
  std::sort(out.begin(), out.end(), [](const BillingWindow& a, const BillingWindow& b) {
    return std::tie(a.from, a.id) < std::tie(b.from, b.id);
  });
  return out;
}

}  // namespace tally::model
