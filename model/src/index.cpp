#include "tally/model/index.hpp"

#include <set>
#include <unordered_set>

#include "lookup.hpp"
#include "saturating.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

namespace {

struct Charged {
  std::string node;
  ResourceList capacity;
  std::string ns;
  std::vector<std::string> chain;  // the namespaces the budget was charged to
  ResourceList budget;
  ResourceList held;  // devices only
};

template <class Map>
void addTo(Map& sums, const std::string& key, const ResourceList& amounts, int sign) {
  if (amounts.empty()) return;
  auto& list = sums[key];
  for (const auto& [name, amount] : amounts) list.add(name, sign * amount);
  if (list.empty()) sums.erase(key);
}

std::int64_t lookup(const CowMap<ResourceList>& sums, std::string_view key, std::string_view name) {
  const ResourceList* list = sums.find(key);
  return list ? list->get(name) : 0;
}

}  // namespace

struct UsageIndex::State {
  Cluster cluster;
  std::unordered_map<std::string, Charged> podCharges;     // pod key
  std::unordered_map<std::string, Charged> deviceCharges;  // device key
  std::unordered_map<std::string, Charged> claimCharges;   // claim key
  // DRA: slice names by pool and by node they put devices on; claims by the
  // node they are allocated on, and those whose charge depends on slices
  // elsewhere (not allocated yet, or naming a device no known slice lists).
  std::map<DraPoolKey, std::set<std::string>> slicesByPool;
  std::unordered_map<std::string, std::set<std::string>> slicesByNode;
  std::unordered_map<std::string, std::set<std::string>> claimKeysByNode;
  std::unordered_map<std::string, std::string> claimIndexedNode;
  std::unordered_map<std::string, ResourceList> claimPendingOf;  // claim key -> claimPendingUnits
  CowMap<std::int64_t> claimPending;                             // class -> their sum
  CowMap<ResourceList> claimAsks;  // every claim key -> claimPendingUnits (empty: asks nothing more)
  std::set<std::string> claimsToRevisit;
  std::unordered_map<std::string, std::string> podKeyByUid;
  std::unordered_map<std::string, std::string> vmiKeyByUid;
  std::unordered_map<std::string, std::set<std::string>> vmiKeysByPodUid;     // status.activePods
  std::unordered_map<std::string, std::set<std::string>> deviceKeysByVmiUid;  // attachedTo.uid
  // What snapshots copy lives in CowMaps: a copy shares every untouched bucket.
  CowMap<ResourceList> nodeUsed, nodeHeld, assumedUsed;
  CowMap<ResourceList> namespaceUsed, subtreeUsed;
  NameMap<ResourceList> namespacePlaced;
  CowMap<ResourceList> placedSubtree;  // units on nodes, by resource
  CowMap<std::string> unboundPods;     // pod key -> uid of pods without a node
  struct Assumption {
    std::string node;
    ResourceList units;
    std::vector<std::string> chain;
  };
  std::unordered_map<std::string, Assumption> assumed;                                      // pod uid -> placement
  std::unordered_map<std::string, std::unordered_map<std::string, std::int64_t>> nodeFree;  // node -> class -> free
  const Cluster* clusterCopy = nullptr;                                                     // noteClusterCopy
  CowMap<std::int64_t> poolFree;                                                            // class -> free
  // Nodes whose used, held or free units changed since takeTouchedNodes().
  std::unordered_set<std::string> touchedNodes;
  bool allNodesTouched = true;

  void noteBinding(const std::string& key, const Pod* pod) {
    if (pod && pod->nodeName.empty() && !isTerminal(*pod)) {
      unboundPods[key] = pod->uid;
    } else {
      unboundPods.erase(key);
    }
  }

  std::int64_t usedOn(std::string_view node, std::string_view resource) const {
    return lookup(nodeUsed, node, resource) + lookup(assumedUsed, node, resource);
  }

  void charge(const Charged& c, int sign) {
    if (!c.node.empty()) {
      addTo(nodeUsed, c.node, c.capacity, sign);
      addTo(nodeHeld, c.node, c.held, sign);
      addTo(namespacePlaced, c.ns, c.capacity, sign);
      for (const auto& a : c.chain) addTo(placedSubtree, a, c.capacity, sign);
    }
    addTo(namespaceUsed, c.ns, c.budget, sign);
    for (const auto& a : c.chain) addTo(subtreeUsed, a, c.budget, sign);
  }

  void refreshNodeFree(const std::string& nodeName) {
    if (!allNodesTouched) touchedNodes.insert(nodeName);
    auto node = cluster.nodes.find(nodeName);
    auto& perClass = nodeFree[nodeName];
    for (const auto& [className, cls] : cluster.classes) {
      std::int64_t free = 0;
      if (node != cluster.nodes.end() && inPool(node->second, cls)) {
        free = std::max<std::int64_t>(0, unitsServed(node->second, cls).units - usedOn(nodeName, cls.resourceName));
      }
      std::int64_t& old = perClass[className];
      poolFree[className] += free - old;
      old = free;
    }
  }

  void refreshAllNodeFree() {
    allNodesTouched = true;
    touchedNodes.clear();
    nodeFree.clear();
    poolFree.clear();
    for (const auto& [name, node] : cluster.nodes) refreshNodeFree(name);
  }

  // The launcher rule's facts, read from the index's own maps.
  struct Facts final : LaunchFacts {
    const State* s;
    explicit Facts(const State* state) : s(state) {}
    void forEachVmiListing(const Pod& pod,
                           const std::function<void(const VirtualMachineInstance&)>& visit) const override {
      auto it = s->vmiKeysByPodUid.find(pod.uid);
      if (it == s->vmiKeysByPodUid.end()) return;
      for (const auto& key : it->second) {
        auto vmi = s->cluster.vmis.find(key);
        if (vmi != s->cluster.vmis.end()) visit(vmi->second);
      }
    }
    void forEachDeviceOf(const VirtualMachineInstance& vmi,
                         const std::function<void(const GpuDevice&)>& visit) const override {
      auto it = s->deviceKeysByVmiUid.find(vmi.uid);
      if (it == s->deviceKeysByVmiUid.end()) return;
      for (const auto& key : it->second) {
        auto d = s->cluster.devices.find(key);
        if (d != s->cluster.devices.end()) visit(d->second);
      }
    }
  };

  Launch launchOf(const Pod& pod) const { return model::launchOf(pod, Facts(this)); }

  void forgetListing(const std::string& podUid, const std::string& vmiKey) {
    auto it = vmiKeysByPodUid.find(podUid);
    if (it == vmiKeysByPodUid.end()) return;
    it->second.erase(vmiKey);
    if (it->second.empty()) vmiKeysByPodUid.erase(it);
  }

  void uncharge(std::unordered_map<std::string, Charged>& charges, const std::string& key) {
    auto it = charges.find(key);
    if (it == charges.end()) return;
    Charged old = std::move(it->second);
    charges.erase(it);
    charge(old, -1);
    if (!old.node.empty()) refreshNodeFree(old.node);
  }

  void refreshPod(const std::string& key) {
    uncharge(podCharges, key);
    auto it = cluster.pods.find(key);
    if (it == cluster.pods.end()) return;
    const Pod& pod = it->second;
    PodUsage u = podUsage(pod, launchOf(pod), cluster);
    Charged c{u.node, std::move(u.capacity), pod.ns, detail::chainOf(cluster, pod.ns), std::move(u.budget), {}};
    charge(c, +1);
    std::string node = c.node;
    podCharges.emplace(key, std::move(c));
    if (!node.empty()) refreshNodeFree(node);
  }

  void refreshDevice(const std::string& key) {
    uncharge(deviceCharges, key);
    auto it = cluster.devices.find(key);
    if (it == cluster.devices.end()) return;
    const GpuDevice& d = it->second;
    DeviceUsage u = deviceUsage(d, cluster);
    Charged c{u.node, u.capacity, d.ns, detail::chainOf(cluster, d.ns), std::move(u.budget), u.capacity};
    charge(c, +1);
    std::string node = c.node;
    deviceCharges.emplace(key, std::move(c));
    if (!node.empty()) refreshNodeFree(node);
  }

  static std::string claimNode(const ResourceClaim& claim, const Charged& c) {
    return claim.allocatedNode.empty() ? c.node : claim.allocatedNode;
  }

  void refreshClaim(const std::string& key) {
    if (auto indexed = claimIndexedNode.find(key); indexed != claimIndexedNode.end()) {
      auto byNode = claimKeysByNode.find(indexed->second);
      if (byNode != claimKeysByNode.end()) {
        byNode->second.erase(key);
        if (byNode->second.empty()) claimKeysByNode.erase(byNode);
      }
      claimIndexedNode.erase(indexed);
    }
    claimsToRevisit.erase(key);
    if (auto old = claimPendingOf.find(key); old != claimPendingOf.end()) {
      for (const auto& [cls, units] : old->second) {
        std::int64_t& total = claimPending[cls];
        total -= units;
        if (total == 0) claimPending.erase(cls);
      }
      claimPendingOf.erase(old);
    }
    uncharge(claimCharges, key);
    auto it = cluster.resourceClaims.find(key);
    if (it == cluster.resourceClaims.end()) {
      claimAsks.erase(key);
      return;
    }
    const ResourceClaim& claim = it->second;
    ClaimUsage u = claimUsage(cluster, claim);
    ResourceList pendingUnits = claimPendingUnits(cluster, claim);
    if (const ResourceList* asked = claimAsks.find(key); !asked || !(*asked == pendingUnits)) {
      claimAsks[key] = pendingUnits;
    }
    if (!pendingUnits.empty()) {
      for (const auto& [cls, units] : pendingUnits) {
        std::int64_t& total = claimPending[cls];
        total = detail::saturatingAdd(total, units);
      }
      claimPendingOf.emplace(key, std::move(pendingUnits));
    }
    Charged c{u.node, std::move(u.capacity), claim.ns, detail::chainOf(cluster, claim.ns), std::move(u.budget), {}};
    charge(c, +1);
    const std::string node = claimNode(claim, c);
    if (!node.empty()) {
      claimKeysByNode[node].insert(key);
      claimIndexedNode[key] = node;
    }
    if (claimUsageDependsOnInventory(cluster, claim, u)) claimsToRevisit.insert(key);
    std::string charged = c.node;
    claimCharges.emplace(key, std::move(c));
    if (!charged.empty()) refreshNodeFree(charged);
  }

  std::vector<DraNodeSlice> foldNode(const std::string& name) const {
    std::vector<DraNodeSlice> out;
    auto slices = slicesByNode.find(name);
    if (slices == slicesByNode.end()) return out;
    std::map<DraPoolKey, DraPoolState> pools;  // each pool's state worked out once for the node
    for (const auto& sliceName : slices->second) {
      auto slice = cluster.resourceSlices.find(sliceName);
      if (slice == cluster.resourceSlices.end()) continue;
      const DraPoolKey key{slice->second.driver, slice->second.pool};
      auto state = pools.find(key);
      if (state == pools.end()) {
        std::vector<const ResourceSlice*> members;
        if (auto pool = slicesByPool.find(key); pool != slicesByPool.end())
          for (const auto& m : pool->second)
            if (auto it = cluster.resourceSlices.find(m); it != cluster.resourceSlices.end())
              members.push_back(&it->second);
        state = pools.emplace(key, draPoolState(key.first, key.second, members)).first;
      }
      if (auto folded = foldSlice(slice->second, name, state->second, cluster.deviceTaintRules))
        out.push_back(std::move(*folded));
    }
    return out;
  }

  // Re-reads what the slices put on the node; refreshes what depends on it.
  void refoldNode(const std::string& name) {
    auto node = cluster.nodes.find(name);
    if (node == cluster.nodes.end()) return;
    std::vector<DraNodeSlice> dra = foldNode(name);
    if (dra == node->second.dra) return;
    node->second.dra = std::move(dra);
    refreshNodeFree(name);
    refreshClaimsAfterInventoryChange(name);
  }

  void refreshClaimsAfterInventoryChange(const std::string& node) {
    std::set<std::string> keys = claimsToRevisit;
    if (auto it = claimKeysByNode.find(node); it != claimKeysByNode.end())
      keys.insert(it->second.begin(), it->second.end());
    for (const auto& key : keys) refreshClaim(key);
  }

  void indexSlice(const ResourceSlice& slice, int sign, std::set<std::string>& nodes) {
    auto& pool = slicesByPool[{slice.driver, slice.pool}];
    if (sign > 0) {
      pool.insert(slice.name);
    } else {
      pool.erase(slice.name);
    }
    for (const auto& node : sliceNodes(slice)) {
      if (sign > 0) {
        slicesByNode[node].insert(slice.name);
      } else if (auto it = slicesByNode.find(node); it != slicesByNode.end()) {
        it->second.erase(slice.name);
        if (it->second.empty()) slicesByNode.erase(it);
      }
    }
    // Every node of the pool: its completeness may have changed.
    for (const auto& member : pool) {
      auto it = cluster.resourceSlices.find(member);
      if (it != cluster.resourceSlices.end()) nodes.merge(sliceNodes(it->second));
    }
    for (const auto& node : sliceNodes(slice)) nodes.insert(node);
    if (pool.empty()) slicesByPool.erase({slice.driver, slice.pool});
  }

  void refreshLaunchersOf(const std::string& vmiUid) {
    auto vmiKey = vmiKeyByUid.find(vmiUid);
    if (vmiKey == vmiKeyByUid.end()) return;
    auto vmi = cluster.vmis.find(vmiKey->second);
    if (vmi == cluster.vmis.end()) return;
    for (const auto& [podUid, node] : vmi->second.activePods) {
      auto pod = podKeyByUid.find(podUid);
      if (pod != podKeyByUid.end()) refreshPod(pod->second);
    }
  }

  void refreshNamespaceObjects(std::string_view ns) {
    auto [pFirst, pLast] = detail::namespacedRange(cluster.pods, ns);
    std::vector<std::string> pods;
    for (auto it = pFirst; it != pLast; ++it) pods.push_back(it->first);
    for (const auto& k : pods) refreshPod(k);
    auto [dFirst, dLast] = detail::namespacedRange(cluster.devices, ns);
    std::vector<std::string> devices;
    for (auto it = dFirst; it != dLast; ++it) devices.push_back(it->first);
    for (const auto& k : devices) refreshDevice(k);
    auto [cFirst, cLast] = detail::namespacedRange(cluster.resourceClaims, ns);
    std::vector<std::string> claims;
    for (auto it = cFirst; it != cLast; ++it) claims.push_back(it->first);
    for (const auto& k : claims) refreshClaim(k);
  }

  void refreshEverything() {
    for (const auto& [key, d] : cluster.devices) refreshDevice(key);
    for (const auto& [key, p] : cluster.pods) refreshPod(key);
    std::set<std::string> claims;
    for (const auto& [key, c] : cluster.resourceClaims) claims.insert(key);
    for (const auto& [key, c] : claimCharges) claims.insert(key);
    for (const auto& key : claims) refreshClaim(key);
    refreshAllNodeFree();
  }

  void dropAssumption(const std::string& uid) {
    auto it = assumed.find(uid);
    if (it == assumed.end()) return;
    std::string node = it->second.node;
    addTo(assumedUsed, node, it->second.units, -1);
    for (const auto& a : it->second.chain) addTo(placedSubtree, a, it->second.units, -1);
    assumed.erase(it);
    refreshNodeFree(node);
  }
};

UsageIndex::UsageIndex() : state_(std::make_unique<State>()) {}
UsageIndex::~UsageIndex() = default;
UsageIndex::UsageIndex(const UsageIndex& other) : state_(std::make_unique<State>(*other.state_)) {}
UsageIndex& UsageIndex::operator=(const UsageIndex& other) {
  if (this != &other) state_ = std::make_unique<State>(*other.state_);
  return *this;
}

UsageIndex UsageIndex::fromCluster(const Cluster& cluster) {
  UsageIndex index;
  State& s = *index.state_;
  s.cluster = cluster;
  for (const auto& [key, pod] : cluster.pods) {
    s.podKeyByUid[pod.uid] = key;
    s.noteBinding(key, &pod);
  }
  for (const auto& [key, vmi] : cluster.vmis) {
    s.vmiKeyByUid[vmi.uid] = key;
    for (const auto& [podUid, node] : vmi.activePods) s.vmiKeysByPodUid[podUid].insert(key);
  }
  for (const auto& [key, d] : cluster.devices) {
    if (!d.attachedTo.uid.empty()) s.deviceKeysByVmiUid[d.attachedTo.uid].insert(key);
  }
  std::set<std::string> ignored;
  for (const auto& [name, slice] : cluster.resourceSlices) s.indexSlice(slice, +1, ignored);
  for (auto& [name, node] : s.cluster.nodes) node.dra = s.foldNode(name);
  s.refreshEverything();
  return index;
}

void UsageIndex::upsertNode(const Node& node) {
  State& s = *state_;
  Node& stored = s.cluster.nodes[node.name];
  std::vector<DraNodeSlice> old = std::move(stored.dra);
  stored = node;
  stored.dra = s.foldNode(node.name);  // never decoded from the Node: the slices say it
  const bool inventoryChanged = stored.dra != old;
  s.refreshNodeFree(node.name);
  if (inventoryChanged) s.refreshClaimsAfterInventoryChange(node.name);
}

void UsageIndex::removeNode(std::string_view name) {
  const bool hadDevices =
      state_->cluster.nodes.contains(std::string(name)) && !state_->cluster.nodes.at(std::string(name)).dra.empty();
  state_->cluster.nodes.erase(std::string(name));
  state_->refreshNodeFree(std::string(name));
  state_->nodeFree.erase(std::string(name));
  // Claims allocated there name devices no node lists any more.
  if (hadDevices) state_->refreshClaimsAfterInventoryChange(std::string(name));
}

void UsageIndex::upsertClass(const DeviceClass& cls) {
  auto it = state_->cluster.classes.find(cls.name);
  bool sameRules = it != state_->cluster.classes.end() && it->second.resourceName == cls.resourceName &&
                   it->second.allocation == cls.allocation && it->second.nodeMode == cls.nodeMode &&
                   it->second.share == cls.share && it->second.memoryMiB == cls.memoryMiB;
  state_->cluster.classes[cls.name] = cls;
  // A status-only change (gate, acknowledgements) moves no unit.
  if (!sameRules) state_->refreshEverything();
}

void UsageIndex::removeClass(std::string_view name) {
  state_->cluster.classes.erase(std::string(name));
  state_->refreshEverything();
}

void UsageIndex::upsertNamespace(const Namespace& ns) {
  auto it = state_->cluster.namespaces.find(ns.name);
  bool sameTree = it != state_->cluster.namespaces.end() && it->second.tree == ns.tree;
  state_->cluster.namespaces[ns.name] = ns;
  if (!sameTree) state_->refreshNamespaceObjects(ns.name);
}

void UsageIndex::removeNamespace(std::string_view name) {
  state_->cluster.namespaces.erase(std::string(name));
  state_->refreshNamespaceObjects(name);
}

void UsageIndex::upsertPod(const Pod& pod) {
  State& s = *state_;
  std::string key = objectKey(pod.ns, pod.name);
  auto old = s.cluster.pods.find(key);
  if (old != s.cluster.pods.end() && old->second.uid != pod.uid) s.podKeyByUid.erase(old->second.uid);
  s.cluster.pods[key] = pod;
  s.podKeyByUid[pod.uid] = key;
  s.noteBinding(key, &pod);
  if (!pod.nodeName.empty() || isTerminal(pod)) s.dropAssumption(pod.uid);
  s.refreshPod(key);
}

void UsageIndex::removePod(std::string_view ns, std::string_view name) {
  State& s = *state_;
  std::string key = objectKey(ns, name);
  auto it = s.cluster.pods.find(key);
  if (it == s.cluster.pods.end()) return;
  std::string uid = it->second.uid;
  s.cluster.pods.erase(it);
  s.podKeyByUid.erase(uid);
  s.noteBinding(key, nullptr);
  s.dropAssumption(uid);
  s.refreshPod(key);
}

void UsageIndex::upsertDevice(const GpuDevice& device) {
  State& s = *state_;
  std::string key = objectKey(device.ns, device.name);
  std::string oldVmi;
  auto old = s.cluster.devices.find(key);
  if (old != s.cluster.devices.end()) oldVmi = old->second.attachedTo.uid;
  if (!oldVmi.empty()) s.deviceKeysByVmiUid[oldVmi].erase(key);
  s.cluster.devices[key] = device;
  if (!device.attachedTo.uid.empty()) s.deviceKeysByVmiUid[device.attachedTo.uid].insert(key);
  s.refreshDevice(key);
  if (!oldVmi.empty()) s.refreshLaunchersOf(oldVmi);
  if (!device.attachedTo.uid.empty() && device.attachedTo.uid != oldVmi) s.refreshLaunchersOf(device.attachedTo.uid);
}

void UsageIndex::removeDevice(std::string_view ns, std::string_view name) {
  State& s = *state_;
  std::string key = objectKey(ns, name);
  auto it = s.cluster.devices.find(key);
  if (it == s.cluster.devices.end()) return;
  std::string vmi = it->second.attachedTo.uid;
  s.cluster.devices.erase(it);
  if (!vmi.empty()) s.deviceKeysByVmiUid[vmi].erase(key);
  s.refreshDevice(key);
  if (!vmi.empty()) s.refreshLaunchersOf(vmi);
}

void UsageIndex::upsertVmi(const VirtualMachineInstance& vmi) {
  State& s = *state_;
  std::string key = objectKey(vmi.ns, vmi.name);
  std::set<std::string> affected;
  auto old = s.cluster.vmis.find(key);
  if (old != s.cluster.vmis.end()) {
    for (const auto& [podUid, node] : old->second.activePods) {
      affected.insert(podUid);
      s.forgetListing(podUid, key);
    }
    if (old->second.uid != vmi.uid) s.vmiKeyByUid.erase(old->second.uid);
  }
  s.cluster.vmis[key] = vmi;
  s.vmiKeyByUid[vmi.uid] = key;
  for (const auto& [podUid, node] : vmi.activePods) {
    affected.insert(podUid);
    s.vmiKeysByPodUid[podUid].insert(key);
  }
  for (const auto& uid : affected) {
    auto pod = s.podKeyByUid.find(uid);
    if (pod != s.podKeyByUid.end()) s.refreshPod(pod->second);
  }
}

void UsageIndex::removeVmi(std::string_view ns, std::string_view name) {
  State& s = *state_;
  std::string key = objectKey(ns, name);
  auto it = s.cluster.vmis.find(key);
  if (it == s.cluster.vmis.end()) return;
  VirtualMachineInstance old = std::move(it->second);
  s.cluster.vmis.erase(it);
  s.vmiKeyByUid.erase(old.uid);
  for (const auto& [podUid, node] : old.activePods) {
    s.forgetListing(podUid, key);
    auto pod = s.podKeyByUid.find(podUid);
    if (pod != s.podKeyByUid.end()) s.refreshPod(pod->second);
  }
}

void UsageIndex::upsertResourceSlice(const ResourceSlice& slice) {
  State& s = *state_;
  std::set<std::string> nodes;
  auto old = s.cluster.resourceSlices.find(slice.name);
  if (old != s.cluster.resourceSlices.end()) {
    ResourceSlice previous = old->second;
    s.cluster.resourceSlices.erase(old);
    s.indexSlice(previous, -1, nodes);
  }
  s.cluster.resourceSlices[slice.name] = slice;
  s.indexSlice(slice, +1, nodes);
  for (const auto& node : nodes) s.refoldNode(node);
}

void UsageIndex::removeResourceSlice(std::string_view name) {
  State& s = *state_;
  auto it = s.cluster.resourceSlices.find(std::string(name));
  if (it == s.cluster.resourceSlices.end()) return;
  ResourceSlice previous = std::move(it->second);
  s.cluster.resourceSlices.erase(it);
  std::set<std::string> nodes;
  s.indexSlice(previous, -1, nodes);
  for (const auto& node : nodes) s.refoldNode(node);
}

void UsageIndex::upsertResourceClaim(const ResourceClaim& claim) {
  std::string key = objectKey(claim.ns, claim.name);
  state_->cluster.resourceClaims[key] = claim;
  state_->refreshClaim(key);
}

void UsageIndex::removeResourceClaim(std::string_view ns, std::string_view name) {
  std::string key = objectKey(ns, name);
  if (state_->cluster.resourceClaims.erase(key) == 0) return;
  state_->refreshClaim(key);
}

void UsageIndex::upsertDeviceTaintRule(const DeviceTaintRule& rule) {
  auto it = state_->cluster.deviceTaintRules.find(rule.name);
  if (it != state_->cluster.deviceTaintRules.end() && it->second == rule) return;
  state_->cluster.deviceTaintRules[rule.name] = rule;
  for (const auto& [name, node] : state_->slicesByNode) state_->refoldNode(name);
}

void UsageIndex::removeDeviceTaintRule(std::string_view name) {
  if (state_->cluster.deviceTaintRules.erase(std::string(name)) == 0) return;
  for (const auto& [node, slices] : state_->slicesByNode) state_->refoldNode(node);
}

void UsageIndex::assume(const Pod& pod, std::string_view node) {
  State& s = *state_;
  s.dropAssumption(pod.uid);
  Pod placed = pod;
  placed.nodeName = std::string(node);
  PodUsage u = podUsage(placed, s.launchOf(pod), s.cluster);
  // What its claims still ask is held on the node too, until the pod is seen
  // bound: the allocator writes the claims' allocation before the bind, and a
  // filter between the two must not find those units free.
  if (!pod.claims.empty()) {
    for (const auto& [resource, units] : podClaimUnits(s.cluster, *this, pod).byResource) {
      u.capacity.add(resource, units);
    }
  }
  if (u.capacity.empty()) return;
  addTo(s.assumedUsed, placed.nodeName, u.capacity, +1);
  auto chain = detail::chainOf(s.cluster, pod.ns);
  for (const auto& a : chain) addTo(s.placedSubtree, a, u.capacity, +1);
  s.assumed[pod.uid] = {placed.nodeName, u.capacity, std::move(chain)};
  s.refreshNodeFree(placed.nodeName);
}

void UsageIndex::forget(std::string_view podUid) { state_->dropAssumption(std::string(podUid)); }

std::size_t UsageIndex::assumedCount() const { return state_->assumed.size(); }

std::int64_t UsageIndex::nodeUsed(std::string_view node, std::string_view resource) const {
  return state_->usedOn(node, resource);
}

std::int64_t UsageIndex::nodeHeld(std::string_view node, std::string_view resource) const {
  return lookup(state_->nodeHeld, node, resource);
}

std::int64_t UsageIndex::subtreeUsed(std::string_view ns, std::string_view key) const {
  return lookup(state_->subtreeUsed, ns, key);
}

std::int64_t UsageIndex::subtreePlaced(std::string_view ns, std::string_view resource) const {
  return lookup(state_->placedSubtree, ns, resource);
}

std::int64_t UsageIndex::namespaceUsed(std::string_view ns, std::string_view key) const {
  return lookup(state_->namespaceUsed, ns, key);
}

void UsageIndex::noteClusterCopy(const Cluster* copy) { state_->clusterCopy = copy; }

std::int64_t UsageIndex::poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const {
  if (&cluster != &state_->cluster && &cluster != state_->clusterCopy)
    return CapacityView::poolFreeUnits(cluster, pool);
  const std::int64_t* free = state_->poolFree.find(pool.name);
  return free ? *free : 0;
}

std::int64_t UsageIndex::pendingClaimUnits(const Cluster& cluster, const DeviceClass& pool) const {
  if (&cluster != &state_->cluster && &cluster != state_->clusterCopy)
    return CapacityView::pendingClaimUnits(cluster, pool);
  const std::int64_t* units = state_->claimPending.find(pool.name);
  return units ? *units : 0;
}

std::optional<ResourceList> UsageIndex::claimAsks(const ClusterObjects&, std::string_view claimKey) const {
  // The index's own claims answer, whichever cluster copy the caller decides
  // on: published clusters hold no claims.
  const ResourceList* asks = state_->claimAsks.find(claimKey);
  if (!asks) return std::nullopt;
  return *asks;
}

bool UsageIndex::counts(const Pod& pod) const {
  auto it = state_->cluster.pods.find(objectKey(pod.ns, pod.name));
  return it != state_->cluster.pods.end() && it->second.uid == pod.uid && !isTerminal(it->second);
}

UsageSnapshot UsageIndex::snapshot() const {
  const State& s = *state_;
  UsageSnapshot snap;
  snap.nodeUsed_ = s.nodeUsed;
  snap.assumedUsed_ = s.assumedUsed;
  snap.nodeHeld_ = s.nodeHeld;
  snap.namespaceUsed_ = s.namespaceUsed;
  snap.subtreeUsed_ = s.subtreeUsed;
  snap.placedSubtree_ = s.placedSubtree;
  snap.poolFree_ = s.poolFree;
  snap.claimPending_ = s.claimPending;
  snap.claimAsks_ = s.claimAsks;
  snap.unboundPods_ = s.unboundPods;
  return snap;
}

std::int64_t UsageSnapshot::nodeUsed(std::string_view node, std::string_view resource) const {
  return lookup(nodeUsed_, node, resource) + lookup(assumedUsed_, node, resource);
}
std::int64_t UsageSnapshot::nodeHeld(std::string_view node, std::string_view resource) const {
  return lookup(nodeHeld_, node, resource);
}
std::int64_t UsageSnapshot::subtreeUsed(std::string_view ns, std::string_view key) const {
  return lookup(subtreeUsed_, ns, key);
}
std::int64_t UsageSnapshot::subtreePlaced(std::string_view ns, std::string_view resource) const {
  return lookup(placedSubtree_, ns, resource);
}
std::int64_t UsageSnapshot::namespaceUsed(std::string_view ns, std::string_view key) const {
  return lookup(namespaceUsed_, ns, key);
}
bool UsageSnapshot::counts(const Pod& pod) const {
  const std::string* uid = unboundPods_.find(objectKey(pod.ns, pod.name));  // one small key, only per request
  return uid && *uid == pod.uid;
}
std::int64_t UsageSnapshot::poolFreeUnits(const Cluster&, const DeviceClass& pool) const {
  const std::int64_t* free = poolFree_.find(pool.name);
  return free ? *free : 0;
}
std::int64_t UsageSnapshot::pendingClaimUnits(const Cluster&, const DeviceClass& pool) const {
  const std::int64_t* units = claimPending_.find(pool.name);
  return units ? *units : 0;
}

std::optional<ResourceList> UsageSnapshot::claimAsks(const ClusterObjects&, std::string_view claimKey) const {
  const ResourceList* asks = claimAsks_.find(claimKey);
  if (!asks) return std::nullopt;
  return *asks;
}

UsageIndex::TouchedNodes UsageIndex::takeTouchedNodes() {
  State& s = *state_;
  TouchedNodes t;
  t.all = s.allNodesTouched;
  if (!t.all) t.nodes.assign(s.touchedNodes.begin(), s.touchedNodes.end());
  s.touchedNodes.clear();
  s.allNodesTouched = false;
  return t;
}

const Cluster& UsageIndex::cluster() const { return state_->cluster; }
Cluster& UsageIndex::mutableClusterForUntrackedKinds() { return state_->cluster; }

UsageTotals UsageIndex::totals() const {
  UsageTotals t;
  state_->nodeUsed.forEach([&](std::string_view k, const ResourceList& v) { t.nodeUsed.emplace(k, v); });
  state_->nodeHeld.forEach([&](std::string_view k, const ResourceList& v) { t.nodeHeld.emplace(k, v); });
  state_->namespaceUsed.forEach([&](std::string_view k, const ResourceList& v) { t.namespaceUsed.emplace(k, v); });
  for (const auto& [k, v] : state_->namespacePlaced) t.namespacePlaced.emplace(k, v);
  return t;
}

}  // namespace tally::model
