#include "tally/model/sources.hpp"

#include "tally/model/objects.hpp"

namespace tally::model {

std::string_view toString(SourceState state) {
  switch (state) {
    case SourceState::NotConfigured: return "NotConfigured";
    case SourceState::Unsynced: return "Unsynced";
    case SourceState::Stale: return "Stale";
    case SourceState::Current: return "Current";
  }
  return "Unknown";
}

SourceState sourceState(const Cluster& cluster, Kind kind, Timestamp now, Timestamp staleAfterSeconds) {
  auto it = cluster.caches.find(kind);
  if (it == cluster.caches.end()) return SourceState::Unsynced;
  if (!it->second.configured) return SourceState::NotConfigured;
  if (!it->second.synced) return SourceState::Unsynced;
  if (now - it->second.lastSynced > staleAfterSeconds) return SourceState::Stale;
  return SourceState::Current;
}

std::vector<HeldReservation> heldReservations(const Cluster& cluster, const DeviceClass& pool) {
  std::vector<HeldReservation> out;
  if (!cluster.plans) return out;
  for (const auto& [key, org] : cluster.organizations) {
    for (const auto& a : org.addons) {
      auto it = cluster.plans->addons.find(a.addonId);
      if (it == cluster.plans->addons.end() || a.quantity <= 0) continue;
      auto profile = reservationProfile(it->second);
      if (!profile || *profile != pool.name) continue;
      out.push_back({org.name, a.addonId, a.quantity * it->second.gpu.begin()->second.devices});
    }
  }
  return out;
}

bool needsLedger(const Cluster& cluster, const DeviceClass& pool) { return !heldReservations(cluster, pool).empty(); }

}  // namespace tally::model
