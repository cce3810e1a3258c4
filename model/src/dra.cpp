#include "tally/model/dra.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/format.h>

#include "saturating.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

namespace {

using detail::saturatingMultiply;

constexpr std::int64_t kMiB = 1024 * 1024;

std::string_view effectName(DraTaintEffect effect) {
  switch (effect) {
    case DraTaintEffect::None: return "None";
    case DraTaintEffect::NoSchedule: return "NoSchedule";
    case DraTaintEffect::NoExecute: return "NoExecute";
  }
  return "None";
}

bool blocks(const DraTaint& taint) { return taint.effect != DraTaintEffect::None; }

std::string_view withoutDomain(std::string_view key) {
  auto slash = key.rfind('/');
  return slash == std::string_view::npos ? key : key.substr(slash + 1);
}

// The attribute as the slice writes it, or under its name without a domain
// ("gpu.nvidia.com/productName" answers "productName" and the other way round).
const std::string* attribute(const DraDevice& device, const std::string& name) {
  if (auto it = device.attributes.find(name); it != device.attributes.end()) return &it->second;
  for (const auto& [key, value] : device.attributes) {
    if (withoutDomain(key) == withoutDomain(name)) return &value;
  }
  return nullptr;
}

// Quantities come from objects anyone may write: no figure may overflow.
std::int64_t ceilDiv(std::int64_t value, std::int64_t by) {
  if (by <= 0 || value <= 0) return 0;
  return value / by + (value % by != 0 ? 1 : 0);
}

std::int64_t counterTotal(const DraDevice& d) {
  std::int64_t sum = 0;
  for (const auto& use : d.consumesCounters)
    for (const auto& [name, value] : use.counters) sum += value;
  return sum;
}

// How many of `candidates` (devices of one slice) can be allocated at once
// given the shared counters they consume: smallest total consumption first.
std::int64_t countWithinCounters(const DraNodeSlice& slice, std::vector<const DraDevice*> candidates) {
  std::map<std::string, std::map<std::string, std::int64_t>> left;
  for (const auto& set : slice.sharedCounters) left[set.name] = set.counters;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const DraDevice* a, const DraDevice* b) { return counterTotal(*a) < counterTotal(*b); });
  std::int64_t count = 0;
  for (const DraDevice* d : candidates) {
    bool fits = true;
    for (const auto& use : d->consumesCounters) {
      auto set = left.find(use.counterSet);
      for (const auto& [name, value] : use.counters) {
        // A counter the slice does not publish cannot be consumed: the device
        // is not allocatable (fail closed).
        if (set == left.end() || !set->second.contains(name) || set->second.at(name) < value) fits = false;
      }
    }
    if (!fits) continue;
    for (const auto& use : d->consumesCounters)
      for (const auto& [name, value] : use.counters) left[use.counterSet][name] -= value;
    ++count;
  }
  return count;
}

bool selects(const DeviceTaintRule& rule, const ResourceSlice& slice, const DraDevice& device) {
  return (rule.driver.empty() || rule.driver == slice.driver) && (rule.pool.empty() || rule.pool == slice.pool) &&
         (rule.device.empty() || rule.device == device.name);
}

}  // namespace

std::string draImplicitResourceName(std::string_view deviceClassName) {
  return fmt::format("{}/{}", kDraExtendedResourceDomain, deviceClassName);
}

std::string draDevicesQuotaKey(std::string_view deviceClassName) {
  return fmt::format("{}.deviceclass.resource.k8s.io/devices", deviceClassName);
}

std::string DraPoolState::describe() const {
  return fmt::format("ResourceSlice pool {}/{} generation {}: {} of {} slice(s) seen", driver, pool, generation, seen,
                     resourceSliceCount);
}

DraPoolState draPoolState(std::string_view driver, std::string_view pool,
                          const std::vector<const ResourceSlice*>& slices) {
  DraPoolState out;
  out.driver = std::string(driver);
  out.pool = std::string(pool);
  for (const ResourceSlice* slice : slices) {
    if (out.seen == 0 || slice->generation > out.generation) {
      out.generation = slice->generation;
      out.resourceSliceCount = slice->resourceSliceCount;
      out.seen = 0;
    }
    if (slice->generation == out.generation) {
      ++out.seen;
      // Slices of one generation that disagree on the count: the larger is
      // believed (more slices to wait for, never fewer).
      out.resourceSliceCount = std::max(out.resourceSliceCount, slice->resourceSliceCount);
    }
  }
  return out;
}

std::map<DraPoolKey, DraPoolState> draPools(const ClusterObjects& cluster) {
  std::map<DraPoolKey, std::vector<const ResourceSlice*>> byPool;
  for (const auto& [name, slice] : cluster.resourceSlices) byPool[{slice.driver, slice.pool}].push_back(&slice);
  std::map<DraPoolKey, DraPoolState> out;
  for (const auto& [key, slices] : byPool) out.emplace(key, draPoolState(key.first, key.second, slices));
  return out;
}

std::set<std::string> sliceNodes(const ResourceSlice& slice) {
  std::set<std::string> out;
  if (!slice.perDeviceNodeSelection) {
    if (!slice.nodeName.empty()) out.insert(slice.nodeName);
    return out;
  }
  for (const auto& d : slice.devices)
    if (!d.nodeName.empty()) out.insert(d.nodeName);
  return out;
}

std::optional<DraNodeSlice> foldSlice(const ResourceSlice& slice, std::string_view node, const DraPoolState& pool,
                                      const std::map<std::string, DeviceTaintRule>& rules) {
  // Slices of an older generation are on their way out: the newest counts.
  if (pool.generation != slice.generation) return std::nullopt;
  DraNodeSlice folded;
  for (const auto& device : slice.devices) {
    std::string_view at = slice.perDeviceNodeSelection ? std::string_view(device.nodeName) : slice.nodeName;
    if (at != node) continue;
    DraDevice& d = folded.devices.emplace_back(device);
    for (const auto& [ruleName, rule] : rules)
      if (selects(rule, slice, device)) d.taints.push_back(rule.taint);
  }
  if (folded.devices.empty()) return std::nullopt;
  folded.slice = slice.name;
  folded.driver = slice.driver;
  folded.pool = slice.pool;
  if (!pool.complete()) folded.unknown = pool.describe();
  folded.sharedCounters = slice.sharedCounters;
  return folded;
}

void foldDraInventory(ClusterObjects& cluster) {
  const auto pools = draPools(cluster);
  for (auto& [name, node] : cluster.nodes) node.dra.clear();
  // By slice, not by node: each slice is read once (10,000 slices on 1,000
  // nodes is 10,000 folds, not ten million looks).
  for (const auto& [name, slice] : cluster.resourceSlices) {
    auto pool = pools.find({slice.driver, slice.pool});
    if (pool == pools.end()) continue;
    for (const auto& nodeName : sliceNodes(slice)) {
      auto node = cluster.nodes.find(nodeName);
      if (node == cluster.nodes.end()) continue;
      if (auto folded = foldSlice(slice, nodeName, pool->second, cluster.deviceTaintRules))
        node->second.dra.push_back(std::move(*folded));
    }
  }
}

bool draMember(const DeviceClass& cls, const DraNodeSlice& slice, const DraDevice& device) {
  if (!cls.dra || cls.dra->driver != slice.driver) return false;
  for (const auto& [name, want] : cls.dra->attributes) {
    const std::string* have = attribute(device, name);
    if (!have || *have != want) return false;
  }
  return true;
}

bool draInPool(const Node& node, const DeviceClass& cls) {
  for (const auto& slice : node.dra)
    for (const auto& device : slice.devices)
      if (draMember(cls, slice, device)) return true;
  return false;
}

std::int64_t draShareBytes(const DeviceClass& cls) {
  if (!cls.share || cls.share->memoryMiB <= 0) return 0;
  return saturatingMultiply(cls.share->memoryMiB, kMiB);
}

std::int64_t draDeviceUnits(const DeviceClass& cls, const DraDevice& device) {
  if (cls.allocation != Allocation::Shared) return 1;
  const std::int64_t shareBytes = draShareBytes(cls);
  auto capacity = cls.dra ? device.capacity.find(cls.dra->shareCapacity) : device.capacity.end();
  if (!device.allowMultipleAllocations || !cls.dra || cls.dra->shareCapacity.empty() ||
      capacity == device.capacity.end() || shareBytes == 0)
    return sharesPerDevice(cls);
  std::int64_t units = capacity->second.value / shareBytes;
  if (cls.share->corePercent > 0) units = std::min(units, 100 / cls.share->corePercent);
  if (cls.share->maxSharesPerDevice > 0) units = std::min(units, cls.share->maxSharesPerDevice);
  return std::max<std::int64_t>(0, units);
}

DraNodeUnits draUnitsOn(const Node& node, const DeviceClass& cls) {
  DraNodeUnits out;
  if (!cls.dra) return out;
  for (const auto& slice : node.dra) {
    if (slice.driver != cls.dra->driver) continue;
    std::vector<const DraDevice*> partitions;
    bool members = false;
    for (const auto& device : slice.devices) {
      if (!draMember(cls, slice, device)) continue;
      members = true;
      if (!slice.unknown.empty()) continue;
      auto taint = std::find_if(device.taints.begin(), device.taints.end(), blocks);
      if (taint != device.taints.end()) {
        ++out.unhealthyDevices;
        out.unhealthy.push_back(fmt::format("{}/{}: taint {}={}:{}", slice.pool, device.name, taint->key, taint->value,
                                            effectName(taint->effect)));
        continue;
      }
      if (!device.consumesCounters.empty()) {
        partitions.push_back(&device);
        continue;
      }
      ++out.devices;
      out.units += draDeviceUnits(cls, device);
    }
    if (members && !slice.unknown.empty()) {
      if (std::find(out.unknown.begin(), out.unknown.end(), slice.unknown) == out.unknown.end())
        out.unknown.push_back(slice.unknown);
      continue;
    }
    if (!partitions.empty()) {
      // Partitions are whole devices of their class: one unit each.
      const std::int64_t fit = countWithinCounters(slice, partitions);
      out.devices += fit;
      out.units += fit;
    }
  }
  return out;
}

const DeviceClass* draClassForRequest(const ClusterObjects& cluster, std::string_view deviceClassName) {
  if (deviceClassName.empty()) return nullptr;
  for (const auto& [name, cls] : cluster.classes) {
    if (cls.dra && cls.dra->deviceClassName == deviceClassName) return &cls;
  }
  return nullptr;
}

namespace {

// The choice of the claim's request a result was allocated for.
const DraRequestChoice* choiceOf(const ResourceClaim& claim, std::string_view result) {
  auto slash = result.find('/');
  std::string_view request = result.substr(0, slash);
  std::string_view sub = slash == std::string_view::npos ? std::string_view() : result.substr(slash + 1);
  for (const auto& r : claim.requests) {
    if (r.name != request) continue;
    for (const auto& c : r.choices)
      if (c.name == sub) return &c;
  }
  return nullptr;
}

// The GPU class an allocated device is charged to: a DRA class of its driver
// whose attributes it matches, the one naming the request's DeviceClass
// first, then one naming none.
const DeviceClass* classOfDevice(const ClusterObjects& cluster, const DraNodeSlice& slice, const DraDevice& device,
                                 std::string_view requestClassName) {
  const DeviceClass* fallback = nullptr;
  for (const auto& [name, cls] : cluster.classes) {
    if (!cls.dra || !draMember(cls, slice, device)) continue;
    if (cls.dra->deviceClassName == requestClassName) return &cls;
    if (cls.dra->deviceClassName.empty() && !fallback) fallback = &cls;
  }
  return fallback;
}

// Units of a shared class one capacity figure is worth (rounded up).
std::int64_t sharesOf(const DeviceClass& cls, const std::map<std::string, std::int64_t>& capacity) {
  if (!cls.dra || cls.dra->shareCapacity.empty() || cls.allocation != Allocation::Shared) return 0;
  auto it = capacity.find(cls.dra->shareCapacity);
  return it == capacity.end() ? 0 : ceilDiv(it->second, draShareBytes(cls));
}

std::int64_t mostOnOneNode(const ClusterObjects& cluster, const DeviceClass& cls) {
  std::int64_t most = 0;
  for (const auto& [name, node] : cluster.nodes) most = std::max(most, draUnitsOn(node, cls).units);
  return most;
}

// Units one whole device of the class is worth at most.
std::int64_t wholeDeviceUnits(const ClusterObjects& cluster, const DeviceClass& cls) {
  if (cls.allocation != Allocation::Shared) return 1;
  std::int64_t most = std::max<std::int64_t>(1, sharesPerDevice(cls));
  for (const auto& [name, node] : cluster.nodes)
    for (const auto& slice : node.dra)
      for (const auto& device : slice.devices)
        if (draMember(cls, slice, device)) most = std::max(most, draDeviceUnits(cls, device));
  return most;
}

struct Located {
  const DraNodeSlice* slice = nullptr;
  const DraDevice* device = nullptr;
  std::string node;
};

// The device a result names, on the allocation's node (or, for a claim not
// bound to one node, wherever a known slice lists it).
Located locate(const ClusterObjects& cluster, const ResourceClaim& claim, const DraResult& result) {
  auto search = [&](const Node& node) -> Located {
    for (const auto& slice : node.dra) {
      if (slice.driver != result.driver || slice.pool != result.pool || !slice.unknown.empty()) continue;
      for (const auto& device : slice.devices)
        if (device.name == result.device) return {&slice, &device, node.name};
    }
    return {};
  };
  if (!claim.allocatedNode.empty()) {
    auto node = cluster.nodes.find(claim.allocatedNode);
    return node == cluster.nodes.end() ? Located{} : search(node->second);
  }
  for (const auto& [name, node] : cluster.nodes) {
    Located found = search(node);
    if (found.device) return found;
  }
  return {};
}

}  // namespace

std::int64_t choiceUnits(const ClusterObjects& cluster, const DeviceClass& cls, const DraRequestChoice& choice) {
  if (choice.mode == DraAllocationMode::All) return mostOnOneNode(cluster, cls);
  if (std::int64_t shares = sharesOf(cls, choice.capacity); shares > 0) return saturatingMultiply(choice.count, shares);
  return saturatingMultiply(choice.count, wholeDeviceUnits(cluster, cls));
}

ResourceList requestedUnits(const ClusterObjects& cluster, const DraRequest& request) {
  ResourceList most;
  for (const auto& choice : request.choices) {
    if (choice.adminAccess) continue;
    const DeviceClass* cls = draClassForRequest(cluster, choice.deviceClassName);
    if (!cls) continue;
    const std::int64_t units = choiceUnits(cluster, *cls, choice);
    const std::string key = quotaKey(cls->resourceName);
    if (units > most.get(key)) most.set(key, units);
  }
  return most;
}

ResourceList claimPendingUnits(const ClusterObjects& cluster, const ResourceClaim& claim) {
  ResourceList out;
  if (claim.allocated || claim.deleting || claim.extendedResource) return out;
  for (const auto& request : claim.requests) {
    if (request.choices.empty()) continue;
    const DraRequestChoice& choice = request.choices.front();
    if (choice.adminAccess) continue;
    const DeviceClass* cls = draClassForRequest(cluster, choice.deviceClassName);
    if (!cls) continue;
    out.add(cls->name, choiceUnits(cluster, *cls, choice));
  }
  return out;
}

bool claimUsageDependsOnInventory(const ClusterObjects& cluster, const ResourceClaim& claim, const ClaimUsage& usage) {
  if (claim.extendedResource) return false;
  if (claim.allocated) return !usage.unresolved.empty() || usage.node.empty();
  if (claim.deleting) return false;
  for (const auto& request : claim.requests) {
    for (const auto& choice : request.choices) {
      if (choice.adminAccess) continue;
      const DeviceClass* cls = draClassForRequest(cluster, choice.deviceClassName);
      if (!cls) continue;
      if (choice.mode == DraAllocationMode::All) return true;
      if (cls->allocation == Allocation::Shared && sharesOf(*cls, choice.capacity) == 0) return true;
    }
  }
  return false;
}

ClaimUsage claimUsage(const ClusterObjects& cluster, const ResourceClaim& claim) {
  ClaimUsage out;
  out.allocated = claim.allocated;
  if (claim.extendedResource) return out;
  if (!claim.allocated) {
    if (claim.deleting) return out;
    for (const auto& request : claim.requests)
      for (const auto& [key, units] : requestedUnits(cluster, request)) out.budget.add(key, units);
    return out;
  }
  out.node = claim.allocatedNode;
  for (const auto& result : claim.results) {
    if (result.adminAccess) continue;
    const DraRequestChoice* choice = choiceOf(claim, result.request);
    if (choice && choice->adminAccess) continue;
    const std::string requestClass = choice ? choice->deviceClassName : std::string();
    Located at = locate(cluster, claim, result);
    const DeviceClass* cls = at.device ? classOfDevice(cluster, *at.slice, *at.device, requestClass)
                                       : draClassForRequest(cluster, requestClass);
    if (!cls) continue;  // not a GPU Tally sells
    std::int64_t units = 0;
    if (!at.device) {
      out.unresolved.push_back(fmt::format("{}/{}/{}", result.driver, result.pool, result.device));
      units = wholeDeviceUnits(cluster, *cls);
    } else if (std::int64_t shares = sharesOf(*cls, result.consumedCapacity); shares > 0) {
      units = shares;
    } else {
      units = draDeviceUnits(*cls, *at.device);
    }
    if (out.node.empty()) out.node = at.node;
    out.capacity.add(cls->resourceName, units);
    out.budget.add(quotaKey(cls->resourceName), units);
  }
  if (out.capacity.empty() || out.node.empty()) {
    out.node.clear();
    out.capacity = {};
  }
  return out;
}

bool claimPodDecided(const ClusterObjects& cluster, const Pod& pod) {
  if (pod.claims.empty()) return false;
  return std::any_of(cluster.classes.begin(), cluster.classes.end(),
                     [](const auto& entry) { return entry.second.dra.has_value(); });
}

bool carriesClaimMarker(const Pod& pod) {
  const auto has = [](const ResourceList& requests) { return requests.get(kClaimPodMarker) > 0; };
  return std::any_of(pod.containers.begin(), pod.containers.end(), has) ||
         std::any_of(pod.initContainers.begin(), pod.initContainers.end(),
                     [&](const InitContainer& c) { return has(c.requests); });
}

bool needsClaimMarker(const Cluster& cluster, const Pod& pod) {
  return claimPodDecided(cluster, pod) && gpuRequests(cluster, pod).empty();
}

PodClaimUnits podClaimUnits(const ClusterObjects& cluster, const CapacityView& view, const Pod& pod) {
  PodClaimUnits out;
  for (const PodClaim& entry : pod.claims) {
    if (entry.claimName.empty()) {
      // A template whose claim the pod's status does not name yet. (An entry
      // with neither is invalid; the API server refuses it.)
      out.unseen.push_back(fmt::format("pod {}/{}: claim {} from template {} is not made yet", pod.ns, pod.name,
                                       entry.name, entry.templateName));
      continue;
    }
    const std::string key = objectKey(pod.ns, entry.claimName);
    std::optional<ResourceList> asks = view.claimAsks(cluster, key);
    if (!asks) {
      out.unseen.push_back(
          fmt::format("pod {}/{}: resourceclaim/{} (its claim {}) is not seen yet", pod.ns, pod.name, key, entry.name));
      continue;
    }
    for (const auto& [className, units] : *asks) {
      auto cls = cluster.classes.find(className);
      if (cls == cluster.classes.end()) continue;
      out.byClass.add(className, units);
      out.byResource.add(cls->second.resourceName, units);
    }
  }
  return out;
}

}  // namespace tally::model
