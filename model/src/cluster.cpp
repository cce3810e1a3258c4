#include "tally/model/cluster.hpp"

namespace tally::model {

std::string_view toString(UnorganizedGpuPolicy policy) {
  return policy == UnorganizedGpuPolicy::Refuse ? "refuse" : "allow";
}

std::string_view toString(Kind kind) {
  switch (kind) {
    case Kind::Node: return "Node";
    case Kind::Pod: return "Pod";
    case Kind::Namespace: return "Namespace";
    case Kind::HierarchicalResourceQuota: return "HierarchicalResourceQuota";
    case Kind::ResourceQuota: return "ResourceQuota";
    case Kind::DeviceClass: return "GPUDeviceClass";
    case Kind::GpuDevice: return "GPUDevice";
    case Kind::VirtualMachineInstance: return "VirtualMachineInstance";
    case Kind::Organization: return "Organization";
    case Kind::BillingPlans: return "BillingPlans";
    case Kind::KubeVirt: return "KubeVirt";
    case Kind::Ledger: return "Ledger";
    case Kind::ResourceSlice: return "ResourceSlice";
    case Kind::ResourceClaim: return "ResourceClaim";
    case Kind::DeviceTaintRule: return "DeviceTaintRule";
  }
  return "Unknown";
}

std::string objectKey(std::string_view ns, std::string_view name) {
  std::string key;
  key.reserve(ns.size() + name.size() + 1);
  key.append(ns).append("/").append(name);
  return key;
}

void Cluster::markAllSynced() {
  for (Kind k : kAllKinds) caches[k] = CacheState{true, now};
}

void Cluster::markNotConfigured(Kind kind) { caches[kind] = CacheState{true, now, false}; }

bool Cluster::configured(Kind kind) const {
  auto it = caches.find(kind);
  return it == caches.end() || it->second.configured;
}

bool Cluster::synced(Kind kind) const {
  auto it = caches.find(kind);
  return it != caches.end() && it->second.synced;
}

}  // namespace tally::model
