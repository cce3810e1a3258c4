#pragma once
// Small builders that make test clusters read like the scenario they set up:
// the one set of model objects the tests of every layer build on.

#include <optional>
#include <string>

#include "tally/model/cluster.hpp"
#include "tally/model/dra.hpp"

namespace tally::model::testing {

inline constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";
inline constexpr std::string_view kA100Vgpu = "nvidia.com/A100-10C";
inline constexpr std::string_view kHamiGpu = "nvidia.com/gpu";

inline DeviceClass passthroughClass(std::string name = "h200", std::string resource = std::string(kH200)) {
  DeviceClass c;
  c.name = std::move(name);
  c.workload = Workload::Vm;
  c.allocation = Allocation::Passthrough;
  c.resourceName = std::move(resource);
  c.nodeMode = NodeMode::VmPassthrough;
  c.memoryMiB = 144384;
  c.maxCount = 8;
  return c;
}

inline DeviceClass vgpuClass(std::string name = "a100-10c") {
  DeviceClass c;
  c.name = std::move(name);
  c.workload = Workload::Vm;
  c.allocation = Allocation::Vgpu;
  c.resourceName = std::string(kA100Vgpu);
  c.nodeMode = NodeMode::VmVgpu;
  c.memoryMiB = 10240;
  c.maxCount = 4;
  return c;
}

// A V100-class shared product: 8 GiB and 25% of a 16 GiB GPU -> 2 shares per GPU
// unless maxShares says fewer.
inline DeviceClass sharedClass(std::string name = "v100-8g", std::int64_t deviceMiB = 16384,
                               std::int64_t shareMiB = 8192, std::int64_t corePercent = 25,
                               std::int64_t maxShares = 4) {
  DeviceClass c;
  c.name = std::move(name);
  c.workload = Workload::Pod;
  c.allocation = Allocation::Shared;
  c.resourceName = std::string(kHamiGpu);
  c.nodeMode = NodeMode::PodHami;
  c.memoryMiB = deviceMiB;
  c.maxCount = 4;
  c.share = SharePolicy{shareMiB, corePercent, maxShares};
  return c;
}

// A ready node in `mode` with `count` of `resource` allocatable.
inline Node gpuNode(std::string name, NodeMode mode = NodeMode::VmPassthrough, std::string_view resource = kH200,
                    std::int64_t count = 8) {
  Node n;
  n.name = std::move(name);
  n.activeMode = mode;
  n.expectedMode = mode;
  n.ready = true;
  n.allocatable.set(resource, count);
  return n;
}

inline InventoryParent parent(std::string id, bool healthy, std::string_view type = kA100Vgpu, std::int64_t total = 4,
                              std::int64_t created = 1, std::int64_t available = 3) {
  InventoryParent p;
  p.id = std::move(id);
  p.healthy = healthy;
  p.types[std::string(type)] = VgpuSlots{total, created, available};
  return p;
}

inline Namespace ns(std::string name, std::vector<std::string> ancestorsNearestFirst = {}) {
  Namespace n;
  n.name = name;
  n.tree[name] = 0;
  int depth = 1;
  for (auto& a : ancestorsNearestFirst) n.tree[a] = depth++;
  return n;
}

// Running when bound to `node`, Pending otherwise, unless `phase` says; uid "uid-<name>".
inline Pod gpuPod(std::string nsName, std::string name, std::string_view resource, std::int64_t count,
                  std::string node = "", std::optional<PodPhase> phase = std::nullopt) {
  Pod p;
  p.ns = std::move(nsName);
  p.name = name;
  p.uid = "uid-" + name;
  p.nodeName = std::move(node);
  p.phase = phase.value_or(p.nodeName.empty() ? PodPhase::Pending : PodPhase::Running);
  p.containers.push_back(ResourceList{{std::string(resource), count}});
  return p;
}

inline GpuDevice device(std::string nsName, std::string name, std::string className, std::int64_t count,
                        DevicePhase phase, std::string node = "") {
  GpuDevice d;
  d.ns = std::move(nsName);
  d.name = name;
  d.uid = "uid-" + name;
  d.className = std::move(className);
  d.count = count;
  d.phase = phase;
  d.node = std::move(node);
  return d;
}

inline HierarchicalResourceQuota hrq(std::string nsName, std::string name, std::string key, std::int64_t hard) {
  HierarchicalResourceQuota q;
  q.ns = std::move(nsName);
  q.name = std::move(name);
  q.hard.set(key, hard);
  q.statusHard.set(key, hard);  // as HNC reports it once converged
  return q;
}

inline ReservationRecord record(std::string id, std::string org, std::string profile, std::int64_t devices,
                                ReservationState state, std::string addonId = "h200-reserved") {
  ReservationRecord r;
  r.id = std::move(id);
  r.organization = std::move(org);
  r.profileId = std::move(profile);
  r.devices = devices;
  r.state = state;
  r.requestedAt = 1'700'000'000;
  r.startsAt = 1'700'000'000;
  r.addonId = std::move(addonId);
  r.billingReference = "TICKET-1";
  if (state != ReservationState::Pending && state != ReservationState::Canceled) {
    r.approvedByProduct = "pat@product";
    r.approvedBySre = "sam@sre";
    r.activatedAt = 1'700'000'100;
    r.evidenceRevision = "evidence-1";
  }
  if (state == ReservationState::Released) r.releasedAt = 1'700'100'000;
  return r;
}

// A cluster with synced caches at a fixed time.
inline Cluster syncedCluster(Timestamp now = 1'800'000'000) {
  Cluster c;
  c.now = now;
  c.markAllSynced();
  c.plans = BillingPlans{};
  // Most scenarios are about other rules and keep tenants in bare namespaces;
  // the tenancy tests restore the product's default (Refuse) themselves.
  c.tenancy.unorganized = UnorganizedGpuPolicy::Allow;
  return c;
}

template <typename T>
void put(Cluster& c, T obj);

template <>
inline void put(Cluster& c, Node n) {
  c.nodes[n.name] = std::move(n);
}
template <>
inline void put(Cluster& c, DeviceClass d) {
  c.classes[d.name] = std::move(d);
}
template <>
inline void put(Cluster& c, Namespace n) {
  c.namespaces[n.name] = std::move(n);
}
template <>
inline void put(Cluster& c, Pod p) {
  c.pods[objectKey(p.ns, p.name)] = std::move(p);
}
template <>
inline void put(Cluster& c, GpuDevice d) {
  c.devices[objectKey(d.ns, d.name)] = std::move(d);
}
template <>
inline void put(Cluster& c, VirtualMachineInstance v) {
  c.vmis[objectKey(v.ns, v.name)] = std::move(v);
}
template <>
inline void put(Cluster& c, HierarchicalResourceQuota q) {
  c.hrqs[objectKey(q.ns, q.name)] = std::move(q);
}
template <>
inline void put(Cluster& c, ResourceQuota q) {
  c.quotas[objectKey(q.ns, q.name)] = std::move(q);
}
template <>
inline void put(Cluster& c, Organization o) {
  c.organizations[objectKey(o.ns, o.name)] = std::move(o);
}

template <>
inline void put(Cluster& c, ResourceSlice s) {
  c.resourceSlices[s.name] = std::move(s);
  foldDraInventory(c);
}
template <>
inline void put(Cluster& c, ResourceClaim claim) {
  c.resourceClaims[objectKey(claim.ns, claim.name)] = std::move(claim);
}
template <>
inline void put(Cluster& c, DeviceTaintRule r) {
  c.deviceTaintRules[r.name] = std::move(r);
  foldDraInventory(c);
}

// Dynamic Resource Allocation: a GPU class served by driver gpu.example.com
// whose devices are requested through DeviceClass `deviceClass`.
inline constexpr std::string_view kDraDriver = "gpu.example.com";
inline DeviceClass draClass(std::string name = "h200-dra", std::string deviceClass = "h200.example.com") {
  DeviceClass c;
  c.name = std::move(name);
  c.workload = Workload::Pod;
  c.allocation = Allocation::Passthrough;
  c.nodeMode = NodeMode::Unset;
  c.memoryMiB = 144384;
  c.maxCount = 8;
  c.dra = DraSelection{std::string(kDraDriver), deviceClass, {}, ""};
  c.resourceName = draImplicitResourceName(deviceClass);
  return c;
}

// A ready node with no device-plugin resources (its GPUs come from slices).
inline Node draNode(std::string name) {
  Node n;
  n.name = std::move(name);
  n.ready = true;
  return n;
}

// A slice of pool `pool` on `node` with devices gpu-<first>..: each with a
// productName attribute and `memory` bytes of capacity.
inline ResourceSlice draSlice(std::string name, std::string node, std::string pool, int devices, int first = 0,
                              std::int64_t generation = 1, std::int64_t sliceCount = 1,
                              std::int64_t memory = 141LL << 30) {
  ResourceSlice s;
  s.name = std::move(name);
  s.driver = std::string(kDraDriver);
  s.pool = std::move(pool);
  s.nodeName = std::move(node);
  s.generation = generation;
  s.resourceSliceCount = sliceCount;
  for (int i = first; i < first + devices; ++i) {
    DraDevice d;
    d.name = "gpu-" + std::to_string(i);
    d.attributes["gpu.example.com/productName"] = "H200";
    d.capacity["memory"].value = memory;
    s.devices.push_back(std::move(d));
  }
  return s;
}

// A claim for `count` devices of DeviceClass `deviceClass` (request "gpu").
inline ResourceClaim draClaim(std::string nsName, std::string name, std::string deviceClass, std::int64_t count = 1) {
  ResourceClaim c;
  c.ns = std::move(nsName);
  c.name = std::move(name);
  c.uid = "uid-claim-" + c.name;
  DraRequest r;
  r.name = "gpu";
  DraRequestChoice choice;
  choice.deviceClassName = std::move(deviceClass);
  choice.count = count;
  r.choices.push_back(std::move(choice));
  c.requests.push_back(std::move(r));
  return c;
}

// The claim allocated the named devices of `pool` on `node`.
inline ResourceClaim allocated(ResourceClaim c, std::string node, std::string pool, std::vector<std::string> devices) {
  c.allocated = true;
  c.allocatedNode = std::move(node);
  for (auto& d : devices) c.results.push_back(DraResult{"gpu", std::string(kDraDriver), pool, std::move(d)});
  return c;
}

inline Organization org(std::string name, std::vector<AddonAssignment> addons = {}) {
  Organization o;
  o.ns = name;
  o.name = std::move(name);
  o.addons = std::move(addons);
  return o;
}

}  // namespace tally::model::testing
