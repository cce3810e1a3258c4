// Property tests over random clusters and random event sequences (issue 2):
//  * the incremental UsageIndex always equals a recomputation from scratch
//    (totals, per-node lookups, pool free units, namespace and subtree usage,
//    the published snapshot), after every event;
//  * no placement ever takes a node past the units it serves, and a device set
//    is placed exactly when some node has room for all of it;
//  * budgets never exceed their hard limits after admitted orders and pods;
//  * a bound order holds and charges what it was admitted for, and podDemand
//    charges every pod what the usage totals charge it.
// Every run is deterministic: std::mt19937_64 with the fixed seeds below; a
// failure names its seed and step.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/pool.hpp"
#include "tally/model/budget.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/fit_table.hpp"
#include "tally/model/index.hpp"
#include "tally/model/tenancy.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {

namespace fx = tally::model::testing;

const std::string kPassthrough(fx::kH200);
const std::string kVgpu(fx::kA100Vgpu);
const std::string kShared(fx::kHamiGpu);
const std::string kGpuMem = "nvidia.com/gpumem";
// Every resource name the random clusters use; "cpu" is no GPU resource and must never count.
const std::vector<std::string> kResources = {kPassthrough, kVgpu, kShared, kGpuMem};
const std::vector<std::string> kPodResources = {kPassthrough, kVgpu, kShared, kGpuMem, "cpu"};

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen_); }
  template <typename C>
  const auto& pick(const C& items) {
    auto it = items.begin();
    std::advance(it, between(0, static_cast<std::int64_t>(items.size()) - 1));
    return *it;
  }

 private:
  std::mt19937_64 gen_;
};

// ---------------------------------------------------------------------------
// Random objects
// ---------------------------------------------------------------------------

// The class catalogue: one class per allocation, each selling its own resource.
// `secondClassOnPassthrough` adds a licensed class selling the same resource on
// the same nodes (two pools sharing one resource name and one quota key).
std::vector<DeviceClass> catalogue(bool secondClassOnPassthrough) {
  std::vector<DeviceClass> out = {fx::passthroughClass("h200"), fx::vgpuClass("a100-10c"), fx::sharedClass("v100-8g")};
  if (secondClassOnPassthrough) out.push_back(fx::passthroughClass("h200-licensed"));
  return out;
}

InventoryParent randomParent(Rng& rng, const std::string& id, bool withVgpuSlots) {
  InventoryParent p;
  p.id = id;
  p.healthy = rng.chance(0.8);
  if (withVgpuSlots) {
    std::int64_t created = rng.between(0, 4);
    p.types[kVgpu] = VgpuSlots{4, created, rng.between(0, 4 - created)};
  }
  return p;
}

NodeMode randomMode(Rng& rng) {
  static const std::vector<NodeMode> gpuModes = {NodeMode::VmPassthrough, NodeMode::VmVgpu, NodeMode::PodHami};
  static const std::vector<NodeMode> otherModes = {NodeMode::Disabled, NodeMode::Unset, NodeMode::PodHamiDra};
  return rng.chance(0.9) ? rng.pick(gpuModes) : rng.pick(otherModes);
}

// A node of one of the three modes with allocatable and (usually) inventory;
// sometimes NotReady, cordoned, or switching modes.
Node randomNode(Rng& rng, const std::string& name, double trouble = 0.1) {
  Node n;
  n.name = name;
  n.expectedMode = randomMode(rng);
  n.activeMode = n.expectedMode;
  if (rng.chance(trouble)) n.activeMode = randomMode(rng);        // mid-transition (or not, when equal)
  if (rng.chance(trouble / 2)) n.expectedMode = NodeMode::Unset;  // no expectation: active mode rules
  n.ready = !rng.chance(trouble);
  n.unschedulable = rng.chance(trouble);
  NodeMode mode = n.expectedMode == NodeMode::Unset ? n.activeMode : n.expectedMode;
  switch (mode) {
    case NodeMode::VmPassthrough: n.allocatable.set(kPassthrough, rng.between(0, 8)); break;
    case NodeMode::VmVgpu:
      n.allocatable.set(kVgpu, rng.between(0, 12));
      if (rng.chance(0.7)) {
        n.inventory.emplace();
        for (int i = 0, k = static_cast<int>(rng.between(1, 3)); i < k; ++i) {
          n.inventory->push_back(randomParent(rng, name + "-gpu" + std::to_string(i), true));
        }
      }
      break;
    case NodeMode::PodHami:
      n.allocatable.set(kShared, rng.between(0, 16));
      if (rng.chance(0.85)) {
        n.inventory.emplace();
        for (int i = 0, k = static_cast<int>(rng.between(1, 4)); i < k; ++i) {
          n.inventory->push_back(randomParent(rng, name + "-gpu" + std::to_string(i), false));
        }
      }
      break;
    default:
      if (rng.chance(0.5)) n.allocatable.set(kPassthrough, rng.between(0, 4));  // advertised, but wrong mode
      break;
  }
  return n;
}

// An HNC tree: 1-3 roots and up to 7 children, at most 3 levels deep. Each
// namespace carries its own and its ancestors' tree labels (itself at depth 0).
std::vector<Namespace> randomTree(Rng& rng) {
  std::vector<Namespace> out;
  for (int r = 0, roots = static_cast<int>(rng.between(1, 3)); r < roots; ++r)
    out.push_back(fx::ns("org" + std::to_string(r)));
  for (int i = 0, more = static_cast<int>(rng.between(1, 7)); i < more; ++i) {
    std::vector<const Namespace*> parents;
    for (const auto& n : out) {
      if (n.tree.size() < 3) parents.push_back(&n);
    }
    Namespace child;
    const Namespace& parentNs = *rng.pick(parents);
    child.name = parentNs.name + "-" + std::to_string(i);
    for (const auto& [ancestor, depth] : parentNs.tree) child.tree[ancestor] = depth + 1;
    child.tree[child.name] = 0;
    out.push_back(std::move(child));
  }
  return out;
}

PodPhase randomPhase(Rng& rng) {
  static const std::vector<PodPhase> phases = {PodPhase::Pending, PodPhase::Running,   PodPhase::Running,
                                               PodPhase::Running, PodPhase::Succeeded, PodPhase::Failed,
                                               PodPhase::Unknown};
  return rng.pick(phases);
}

ResourceList randomRequests(Rng& rng, int maxNames) {
  ResourceList l;
  for (int i = 0, k = static_cast<int>(rng.between(0, maxNames)); i < k; ++i) {
    const std::string& name = rng.pick(kPodResources);
    l.set(name, name == kGpuMem ? rng.between(1, 8) * 1024 : rng.between(0, 3));
  }
  return l;
}

// Containers, init containers (some restartable sidecars) and overhead.
void randomiseRequests(Rng& rng, Pod& p) {
  p.containers.clear();
  p.initContainers.clear();
  p.overhead = ResourceList{};
  for (int i = 0, k = static_cast<int>(rng.between(1, 3)); i < k; ++i) p.containers.push_back(randomRequests(rng, 2));
  for (int i = 0, k = static_cast<int>(rng.between(0, 2)); i < k; ++i) {
    p.initContainers.push_back(InitContainer{randomRequests(rng, 2), rng.chance(0.3)});
  }
  if (rng.chance(0.1)) p.overhead.set(rng.pick(kResources), 1);
}

const char* phaseName(PodPhase p) {
  switch (p) {
    case PodPhase::Pending: return "Pending";
    case PodPhase::Running: return "Running";
    case PodPhase::Succeeded: return "Succeeded";
    case PodPhase::Failed: return "Failed";
    case PodPhase::Unknown: return "Unknown";
  }
  return "?";
}

std::string describe(const ResourceList& l) {
  std::string out = "{";
  for (const auto& [k, v] : l) out += (out.size() > 1 ? ", " : "") + k + ": " + std::to_string(v);
  return out + "}";
}

std::string describe(const Pod& p) {
  std::ostringstream s;
  s << "pod " << p.ns << "/" << p.name << " uid=" << p.uid << " node='" << p.nodeName
    << "' phase=" << phaseName(p.phase) << " containers=[";
  for (const auto& c : p.containers) s << describe(c);
  s << "] init=[";
  for (const auto& c : p.initContainers) s << describe(c.requests) << (c.restartable ? "(sidecar)" : "");
  s << "] overhead=" << describe(p.overhead);
  return s.str();
}

std::string describe(const GpuDevice& d) {
  std::ostringstream s;
  s << "gpudevice " << d.ns << "/" << d.name << " class=" << d.className << " count=" << d.count
    << " phase=" << toString(d.phase) << " node='" << d.node << "' attachedTo=" << d.attachedTo.ns << "/"
    << d.attachedTo.name << "(" << d.attachedTo.uid << ")";
  return s.str();
}

std::string describe(const VirtualMachineInstance& v) {
  std::string s = "vmi " + v.ns + "/" + v.name + " uid=" + v.uid + " activePods=[";
  for (const auto& [uid, node] : v.activePods) s += uid + "@" + node + " ";
  return s + "]";
}

std::string describe(const Node& n) {
  std::ostringstream s;
  s << "node " << n.name << " active=" << toString(n.activeMode) << " expected=" << toString(n.expectedMode)
    << " ready=" << n.ready << " cordoned=" << n.unschedulable << " allocatable=" << describe(n.allocatable)
    << " inventory=" << (n.inventory ? std::to_string(n.inventory->size()) + " parent(s)" : "none");
  return s.str();
}

// ---------------------------------------------------------------------------
// Reference view: usage recomputed from scratch, plus the in-flight placements
// the test itself keeps track of (computeUsage knows nothing of assumptions).
// ---------------------------------------------------------------------------

using Assumed = std::map<std::string, std::pair<std::string, ResourceList>>;  // pod uid -> node, units

class ReferenceView final : public CapacityView {
 public:
  ReferenceView(const Cluster& cluster, UsageTotals scratch, const Assumed& assumed)
      : totals_(cluster, std::move(scratch)), assumed_(assumed) {}
  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override {
    std::int64_t used = totals_.nodeUsed(node, resource);
    for (const auto& [uid, placed] : assumed_) {
      if (placed.first == node) used += placed.second.get(resource);
    }
    return used;
  }
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override {
    return totals_.nodeHeld(node, resource);
  }
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override {
    return totals_.subtreeUsed(ns, key);
  }
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override {
    return totals_.namespaceUsed(ns, key);
  }
  bool counts(const Pod& pod) const override { return totals_.counts(pod); }
  // Assumed placements are left out: nothing here compares placed usage while
  // assumptions exist.
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override {
    return totals_.subtreePlaced(ns, resource);
  }
  const TotalsCapacityView& totalsView() const { return totals_; }

 private:
  TotalsCapacityView totals_;
  const Assumed& assumed_;
};

std::string firstDifference(const std::map<std::string, ResourceList>& index,
                            const std::map<std::string, ResourceList>& scratch) {
  std::set<std::string> keys;
  for (const auto& [k, v] : index) keys.insert(k);
  for (const auto& [k, v] : scratch) keys.insert(k);
  for (const auto& k : keys) {
    auto a = index.find(k);
    auto b = scratch.find(k);
    ResourceList la = a == index.end() ? ResourceList{} : a->second;
    ResourceList lb = b == scratch.end() ? ResourceList{} : b->second;
    bool presentA = a != index.end(), presentB = b != scratch.end();
    if (la != lb || presentA != presentB) {
      return k + ": index " + (presentA ? describe(la) : "(absent)") + " vs scratch " +
             (presentB ? describe(lb) : "(absent)");
    }
  }
  return "";
}

std::string totalsDifference(const UsageTotals& index, const UsageTotals& scratch) {
  if (auto d = firstDifference(index.nodeUsed, scratch.nodeUsed); !d.empty()) return "nodeUsed " + d;
  if (auto d = firstDifference(index.nodeHeld, scratch.nodeHeld); !d.empty()) return "nodeHeld " + d;
  if (auto d = firstDifference(index.namespaceUsed, scratch.namespaceUsed); !d.empty()) return "namespaceUsed " + d;
  return "";
}

// Every namespace name a cluster mentions (objects, tree labels), plus `extra`.
std::set<std::string> namespacesMentioned(const Cluster& c, const std::vector<std::string>& extra) {
  std::set<std::string> out(extra.begin(), extra.end());
  for (const auto& [name, n] : c.namespaces) {
    out.insert(name);
    for (const auto& [a, depth] : n.tree) out.insert(a);
  }
  for (const auto& [k, p] : c.pods) out.insert(p.ns);
  for (const auto& [k, d] : c.devices) out.insert(d.ns);
  return out;
}

// The whole equality the index promises, checked against `truth` (the same
// events applied to a plain Cluster) and the test's own record of assumptions.
::testing::AssertionResult indexEqualsRecomputation(const UsageIndex& index, const Cluster& truth,
                                                    const Assumed& assumed,
                                                    const std::vector<std::string>& namespaceNames) {
  const Cluster& held = index.cluster();
  if (held.nodes != truth.nodes || held.classes != truth.classes || held.namespaces != truth.namespaces ||
      held.pods != truth.pods || held.devices != truth.devices || held.vmis != truth.vmis) {
    return ::testing::AssertionFailure() << "index.cluster() holds other objects than the events applied";
  }
  UsageTotals scratch = computeUsage(held);
  if (auto d = totalsDifference(index.totals(), scratch); !d.empty()) {
    return ::testing::AssertionFailure() << "totals() != computeUsage(cluster()): " << d;
  }
  if (index.assumedCount() != assumed.size()) {
    return ::testing::AssertionFailure() << "assumedCount() " << index.assumedCount() << " but " << assumed.size()
                                         << " placement(s) are in flight";
  }
  // index.cluster() equals truth (checked above), so one recomputation serves both.
  ReferenceView ref(truth, std::move(scratch), assumed);
  std::set<std::string> nodes;
  for (const auto& [name, n] : truth.nodes) nodes.insert(name);
  for (const auto& [name, l] : ref.totalsView().totals().nodeUsed) nodes.insert(name);
  for (const auto& [uid, placed] : assumed) nodes.insert(placed.first);
  for (const auto& node : nodes) {
    for (const auto& r : kResources) {
      if (index.nodeUsed(node, r) != ref.nodeUsed(node, r)) {
        return ::testing::AssertionFailure()
               << "nodeUsed(" << node << ", " << r << "): index " << index.nodeUsed(node, r) << ", scratch+assumed "
               << ref.nodeUsed(node, r);
      }
      if (index.nodeHeld(node, r) != ref.nodeHeld(node, r)) {
        return ::testing::AssertionFailure() << "nodeHeld(" << node << ", " << r << "): index "
                                             << index.nodeHeld(node, r) << ", scratch " << ref.nodeHeld(node, r);
      }
    }
  }
  for (const auto& [name, cls] : truth.classes) {
    std::int64_t fast = index.poolFreeUnits(held, cls);
    std::int64_t scan = ref.poolFreeUnits(truth, cls);  // CapacityView's default: a scan of the nodes
    if (fast != scan) {
      return ::testing::AssertionFailure() << "poolFreeUnits(" << name << "): index running total " << fast
                                           << ", scan over recomputed usage " << scan;
    }
    if (assumed.empty() && fast != ref.totalsView().poolFreeUnits(truth, cls)) {
      return ::testing::AssertionFailure()
             << "poolFreeUnits(" << name << "): index " << fast << ", TotalsCapacityView scan "
             << ref.totalsView().poolFreeUnits(truth, cls);
    }
  }
  for (const auto& ns : namespacesMentioned(truth, namespaceNames)) {
    for (const auto& r : kResources) {
      std::string key = quotaKey(r);
      if (index.subtreeUsed(ns, key) != ref.subtreeUsed(ns, key)) {
        return ::testing::AssertionFailure() << "subtreeUsed(" << ns << ", " << key << "): index "
                                             << index.subtreeUsed(ns, key) << ", scratch " << ref.subtreeUsed(ns, key);
      }
      if (index.namespaceUsed(ns, key) != ref.namespaceUsed(ns, key)) {
        return ::testing::AssertionFailure()
               << "namespaceUsed(" << ns << ", " << key << "): index " << index.namespaceUsed(ns, key) << ", scratch "
               << ref.namespaceUsed(ns, key);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The snapshot published to lock-free readers answers as a recomputation does,
// assumptions included; counts() agrees for every pod without a node.
::testing::AssertionResult snapshotEqualsRecomputation(const UsageIndex& index, const Cluster& truth,
                                                       const Assumed& assumed,
                                                       const std::vector<std::string>& namespaceNames) {
  UsageSnapshot snap = index.snapshot();
  ReferenceView ref(truth, computeUsage(truth), assumed);
  std::set<std::string> nodes;
  for (const auto& [name, n] : truth.nodes) nodes.insert(name);
  for (const auto& [name, l] : ref.totalsView().totals().nodeUsed) nodes.insert(name);
  for (const auto& [uid, placed] : assumed) nodes.insert(placed.first);
  for (const auto& node : nodes) {
    for (const auto& r : kResources) {
      if (snap.nodeUsed(node, r) != ref.nodeUsed(node, r) || snap.nodeHeld(node, r) != ref.nodeHeld(node, r)) {
        return ::testing::AssertionFailure()
               << "snapshot node " << node << " " << r << ": used " << snap.nodeUsed(node, r) << " held "
               << snap.nodeHeld(node, r) << ", scratch+assumed used " << ref.nodeUsed(node, r) << " held "
               << ref.nodeHeld(node, r);
      }
    }
  }
  for (const auto& [name, cls] : truth.classes) {
    if (snap.poolFreeUnits(truth, cls) != ref.poolFreeUnits(truth, cls)) {
      return ::testing::AssertionFailure()
             << "snapshot poolFreeUnits(" << name << ") " << snap.poolFreeUnits(truth, cls) << ", scan "
             << ref.poolFreeUnits(truth, cls);
    }
  }
  for (const auto& ns : namespacesMentioned(truth, namespaceNames)) {
    for (const auto& r : kResources) {
      std::string key = quotaKey(r);
      if (snap.subtreeUsed(ns, key) != ref.subtreeUsed(ns, key) ||
          snap.namespaceUsed(ns, key) != ref.namespaceUsed(ns, key)) {
        return ::testing::AssertionFailure()
               << "snapshot " << ns << " " << key << ": subtree " << snap.subtreeUsed(ns, key) << " namespace "
               << snap.namespaceUsed(ns, key) << ", scratch subtree " << ref.subtreeUsed(ns, key) << " namespace "
               << ref.namespaceUsed(ns, key);
      }
    }
  }
  for (const auto& [key, pod] : truth.pods) {
    Pod recreated = pod;
    recreated.uid += "-recreated";
    for (const Pod* p : {&pod, static_cast<const Pod*>(&recreated)}) {
      if (index.counts(*p) != ref.counts(*p)) {
        return ::testing::AssertionFailure() << "index counts() " << index.counts(*p) << " for " << describe(*p);
      }
      if (p->nodeName.empty() && snap.counts(*p) != ref.counts(*p)) {
        return ::testing::AssertionFailure() << "snapshot counts() " << snap.counts(*p) << " for " << describe(*p);
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// ---------------------------------------------------------------------------
// The random world: a truth Cluster and an index fed the same events.
// ---------------------------------------------------------------------------

struct Shape {
  int nodes = 8;
  int pods = 30;
  int devices = 10;
  int vmis = 5;
  double nodeTrouble = 0.1;  // NotReady / cordoned / mode transition
  bool secondClassOnPassthrough = false;
  double crossNamespaceAttach = 0.1;  // share of attachments to a VMI of another namespace
};

class World {
 public:
  World(std::uint64_t seed, const Shape& shape) : rng(seed), shape_(shape) {
    truth.now = 1'800'000'000;
    truth.markAllSynced();
    truth.plans = BillingPlans{};
    for (auto& cls : catalogue(shape.secondClassOnPassthrough)) {
      classNames.push_back(cls.name);
      fx::put(truth, cls);
    }
    for (int i = 0; i < shape.nodes; ++i) {
      std::string name = "node" + std::to_string(i);
      nodeNames.push_back(name);
      fx::put(truth, randomNode(rng, name, shape.nodeTrouble));
    }
    for (auto& n : randomTree(rng)) {
      namespaceNames.push_back(n.name);
      fx::put(truth, std::move(n));
    }
    namespaceNames.push_back("stray");  // pods and devices in a namespace the cache does not hold
    // org0's subtree is an Organization's; the other trees are under none, so
    // their GPU orders are refused under the default policy.
    if (truth.namespaces.contains("org0")) fx::put(truth, fx::org("org0"));
    for (int i = 0; i < shape.vmis; ++i) fx::put(truth, newVmi());
    for (int i = 0; i < shape.pods; ++i) fx::put(truth, newPod());
    for (int i = 0; i < shape.devices; ++i) fx::put(truth, newDevice());
    // A few VMIs listing the pods created after them.
    for (auto& [key, vmi] : truth.vmis) vmi.activePods = chooseActivePods(vmi.ns, key);
  }

  std::string fresh(const std::string& prefix) { return prefix + std::to_string(++serial_); }

  // Pod uids listed by VMIs other than `exceptVmi`. Mostly a uid appears in one
  // VMI; sometimes a second VMI lists it too (stale or forged status), which the
  // launcher rule resolves as "launcher of none".
  std::set<std::string> claimedPodUids(const std::string& exceptVmi) {
    if (rng.chance(0.15)) return {};
    std::set<std::string> out;
    for (const auto& [key, vmi] : truth.vmis) {
      if (key == exceptVmi) continue;
      for (const auto& [uid, node] : vmi.activePods) out.insert(uid);
    }
    return out;
  }

  std::map<std::string, std::string> chooseActivePods(const std::string& ns, const std::string& vmiKey) {
    std::map<std::string, std::string> out;
    std::set<std::string> claimed = claimedPodUids(vmiKey);
    std::vector<const Pod*> sameNs, others;
    for (const auto& [k, p] : truth.pods) {
      if (claimed.contains(p.uid)) continue;
      (p.ns == ns ? sameNs : others).push_back(&p);
    }
    for (int i = 0, k = static_cast<int>(rng.between(0, 2)); i < k; ++i) {
      if (!sameNs.empty() && rng.chance(0.85)) {
        const Pod* p = rng.pick(sameNs);
        out[p->uid] = p->nodeName;
      } else if (!others.empty() && rng.chance(0.5)) {
        const Pod* p = rng.pick(others);  // a VMI never launches a pod of another namespace
        out[p->uid] = p->nodeName;
      } else {
        out[fresh("pod-uid-future-")] = rng.pick(nodeNames);  // a launcher the pod cache has not seen yet
      }
    }
    return out;
  }

  VirtualMachineInstance newVmi() {
    VirtualMachineInstance v;
    v.ns = rng.pick(namespaceNames);
    v.name = fresh("vmi");
    v.uid = fresh("vmi-uid-");
    v.phase = "Running";
    return v;
  }

  Pod newPod() {
    Pod p;
    p.ns = rng.pick(namespaceNames);
    p.name = fresh("pod");
    p.uid = fresh("pod-uid-");
    placePod(p);
    p.phase = randomPhase(rng);
    randomiseRequests(rng, p);
    if (rng.chance(0.2) && !truth.vmis.empty()) {
      const auto& [key, vmi] =
          *std::next(truth.vmis.begin(), rng.between(0, static_cast<std::int64_t>(truth.vmis.size()) - 1));
      p.owners.push_back(
          OwnerReference{"VirtualMachineInstance", vmi.name, vmi.uid, true, "kubevirt.io/v1"});  // proves nothing
    }
    return p;
  }

  void placePod(Pod& p) {
    double roll = static_cast<double>(rng.between(0, 99)) / 100.0;
    p.nodeName = roll < 0.7 ? rng.pick(nodeNames) : roll < 0.8 ? "ghost-node" : "";
  }

  void attach(GpuDevice& d) {
    d.attachedTo = ObjectRef{};
    double roll = static_cast<double>(rng.between(0, 99)) / 100.0;
    if (roll < 0.45 && !truth.vmis.empty()) {
      std::vector<const VirtualMachineInstance*> sameNs, all;
      for (const auto& [k, v] : truth.vmis) {
        all.push_back(&v);
        if (v.ns == d.ns) sameNs.push_back(&v);
      }
      const VirtualMachineInstance* v = nullptr;
      if (!sameNs.empty() && rng.chance(1.0 - shape_.crossNamespaceAttach)) {
        v = rng.pick(sameNs);
      } else if (shape_.crossNamespaceAttach > 0) {
        v = rng.pick(all);  // a device of one namespace attached to a VMI of another
      }
      // Sometimes the name in attachedTo is stale (the VMI was renamed or the
      // status written before the name was known): only the uid may decide.
      if (v) d.attachedTo = ObjectRef{v->ns, rng.chance(0.15) ? "stale-name" : v->name, v->uid};
    } else if (roll < 0.5) {
      d.attachedTo = ObjectRef{d.ns, "gone",
                               rng.chance(0.5) && !oldVmiUids.empty() ? rng.pick(oldVmiUids) : fresh("vmi-uid-gone-")};
    }
  }

  void placeDevice(GpuDevice& d) {
    static const std::vector<DevicePhase> phases = {DevicePhase::Pending,  DevicePhase::Bound, DevicePhase::Attached,
                                                    DevicePhase::Attached, DevicePhase::Lost,  DevicePhase::Released};
    d.phase = rng.pick(phases);
    bool holds = d.phase == DevicePhase::Bound || d.phase == DevicePhase::Attached;
    d.node = rng.chance(holds ? 0.9 : 0.4) ? rng.pick(nodeNames) : "";
  }

  GpuDevice newDevice() {
    GpuDevice d;
    d.ns = rng.pick(namespaceNames);
    d.name = fresh("dev");
    d.uid = fresh("dev-uid-");
    d.className = rng.chance(0.05) ? "no-such-class" : rng.pick(classNames);
    d.count = rng.between(1, 3);
    placeDevice(d);
    attach(d);
    return d;
  }

  template <typename M>
  const typename M::mapped_type* anyOf(const M& m) {
    if (m.empty()) return nullptr;
    return &std::next(m.begin(), rng.between(0, static_cast<std::int64_t>(m.size()) - 1))->second;
  }

  Rng rng;
  Cluster truth;
  std::vector<std::string> classNames, nodeNames, namespaceNames, oldVmiUids;

 protected:
  Shape shape_;
  int serial_ = 0;
};

// Applies random events to the index and to the truth cluster alike.
class EventDriver : public World {
 public:
  EventDriver(std::uint64_t seed, const Shape& shape)
      : World(seed, shape), index(UsageIndex::fromCluster(truth)), engine_(seed * 0x9e3779b97f4a7c15ULL) {}

  // One random event; returns what it did, for failure messages.
  std::string step() {
    static const std::vector<int> weights = {4, 1, 1, 1, 2, 1, 14, 4, 10, 3, 6, 2, 4, 2};
    std::discrete_distribution<int> which(weights.begin(), weights.end());
    std::uniform_int_distribution<std::uint64_t> any;
    std::mt19937_64 local(any(engine_));
    switch (which(local)) {
      case 0: return upsertNode();
      case 1: return removeNode();
      case 2: return upsertClass();
      case 3: return removeClass();
      case 4: return upsertNamespace();
      case 5: return removeNamespace();
      case 6: return upsertPod();
      case 7: return removePod();
      case 8: return upsertDevice();
      case 9: return removeDevice();
      case 10: return upsertVmi();
      case 11: return removeVmi();
      case 12: return assume();
      default: return forget();
    }
  }

  UsageIndex index;
  Assumed assumed;

 private:
  std::string upsertNode() {
    const std::string& name = rng.pick(nodeNames);
    Node n;
    auto it = truth.nodes.find(name);
    if (it != truth.nodes.end() && rng.chance(0.6)) {
      n = it->second;  // a status change of a node that exists
      switch (rng.between(0, 4)) {
        case 0: n.ready = !n.ready; break;
        case 1: n.unschedulable = !n.unschedulable; break;
        case 2: n.expectedMode = randomMode(rng); break;  // a mode transition starts
        case 3: n.activeMode = n.expectedMode; break;     // ... and completes
        default:
          if (n.inventory && !n.inventory->empty()) {
            auto& p = (*n.inventory)[static_cast<std::size_t>(
                rng.between(0, static_cast<std::int64_t>(n.inventory->size()) - 1))];
            p.healthy = !p.healthy;
          } else {
            n.allocatable.set(rng.pick(kResources), rng.between(0, 8));
          }
      }
    } else {
      n = randomNode(rng, name, 0.2);
    }
    index.upsertNode(n);
    std::string what = "upsertNode " + describe(n);
    fx::put(truth, std::move(n));
    return what;
  }

  std::string removeNode() {
    const std::string& name = rng.pick(nodeNames);
    index.removeNode(name);
    truth.nodes.erase(name);
    return "removeNode " + name;
  }

  std::string upsertClass() {
    std::vector<DeviceClass> all = catalogue(shape_.secondClassOnPassthrough);
    DeviceClass cls = rng.pick(all);
    auto it = truth.classes.find(cls.name);
    if (it != truth.classes.end()) {
      cls = it->second;
      switch (rng.between(0, 3)) {
        case 0:
          cls.gateOpen = !cls.gateOpen;
          cls.gateFailureId = cls.gateOpen ? "" : "audit-1";
          break;  // status only
        case 1: cls.memoryMiB = rng.pick(std::vector<std::int64_t>{8192, 16384, 32768}); break;
        case 2:
          if (cls.share)
            cls.share->maxSharesPerDevice = rng.between(1, 4);
          else
            cls.maxCount = rng.between(1, 8);
          break;
        default: cls.nodeMode = rng.chance(0.5) ? defaultNodeMode(cls.allocation) : randomMode(rng); break;
      }
    }
    index.upsertClass(cls);
    std::string what = "upsertClass " + cls.name;
    fx::put(truth, std::move(cls));
    return what;
  }

  std::string removeClass() {
    const std::string& name = rng.pick(classNames);
    index.removeClass(name);
    truth.classes.erase(name);
    return "removeClass " + name;
  }

  std::string upsertNamespace() {
    std::string name = rng.pick(namespaceNames);
    Namespace n;
    auto it = truth.namespaces.find(name);
    if (it != truth.namespaces.end() && rng.chance(0.3)) {
      n = it->second;  // a label change outside the tree
      n.entitledClasses = {rng.pick(classNames)};
    } else {
      // Re-parented under a root (or made a root); its own descendants keep their labels.
      n.name = name;
      n.tree[name] = 0;
      std::vector<const Namespace*> parents;
      for (const auto& [k, cand] : truth.namespaces) {
        if (k != name && !cand.tree.contains(name) && cand.tree.size() < 3) parents.push_back(&cand);
      }
      if (!parents.empty() && rng.chance(0.7)) {
        for (const auto& [a, depth] : rng.pick(parents)->tree) n.tree[a] = depth + 1;
      }
    }
    index.upsertNamespace(n);
    std::string what = "upsertNamespace " + name + " depth " + std::to_string(n.tree.size());
    fx::put(truth, std::move(n));
    return what;
  }

  std::string removeNamespace() {
    const std::string& name = rng.pick(namespaceNames);
    index.removeNamespace(name);
    truth.namespaces.erase(name);
    return "removeNamespace " + name;
  }

  void dropAssumed(const Pod& pod) {
    if (!pod.nodeName.empty() || isTerminal(pod)) assumed.erase(pod.uid);
  }

  std::string upsertPod() {
    const Pod* existing = anyOf(truth.pods);
    Pod p;
    if (existing && rng.chance(0.7)) {
      p = *existing;
      switch (rng.between(0, 4)) {
        case 0: placePod(p); break;  // bound, moved between nodes, or unbound
        case 1: p.phase = randomPhase(rng); break;
        case 2: randomiseRequests(rng, p); break;
        case 3: p.uid = fresh("pod-uid-"); break;  // deleted and re-created under the same name
        default:
          placePod(p);
          p.phase = PodPhase::Running;
          break;
      }
    } else if (rng.chance(0.3) && !truth.vmis.empty()) {
      // The launcher a VMI already announced in status.activePods arrives.
      const VirtualMachineInstance* vmi = anyOf(truth.vmis);
      std::set<std::string> present;
      for (const auto& [k, pod] : truth.pods) present.insert(pod.uid);
      p = newPod();
      p.ns = vmi->ns;
      for (const auto& [uid, node] : vmi->activePods) {
        if (!present.contains(uid)) {
          p.uid = uid;
          p.nodeName = node;
          break;
        }
      }
    } else {
      p = newPod();
    }
    index.upsertPod(p);
    dropAssumed(p);
    std::string what = "upsertPod " + describe(p);
    fx::put(truth, std::move(p));
    return what;
  }

  std::string removePod() {
    const Pod* existing = anyOf(truth.pods);
    if (!existing) return "removePod (none)";
    Pod p = *existing;
    index.removePod(p.ns, p.name);
    assumed.erase(p.uid);
    truth.pods.erase(objectKey(p.ns, p.name));
    return "removePod " + p.ns + "/" + p.name + " uid=" + p.uid;
  }

  std::string upsertDevice() {
    const GpuDevice* existing = anyOf(truth.devices);
    GpuDevice d;
    if (existing && rng.chance(0.7)) {
      d = *existing;
      switch (rng.between(0, 4)) {
        case 0: placeDevice(d); break;  // Bound, Attached, Lost, Released, ...
        case 1: attach(d); break;       // attached to another VMI, or detached
        case 2: d.count = rng.between(1, 4); break;
        case 3: d.className = rng.pick(classNames); break;
        default:
          d.phase = DevicePhase::Attached;
          if (d.node.empty()) d.node = rng.pick(nodeNames);
          attach(d);
          break;
      }
    } else {
      d = newDevice();
    }
    index.upsertDevice(d);
    std::string what = "upsertDevice " + describe(d);
    fx::put(truth, std::move(d));
    return what;
  }

  std::string removeDevice() {
    const GpuDevice* existing = anyOf(truth.devices);
    if (!existing) return "removeDevice (none)";
    std::string ns = existing->ns, name = existing->name;
    index.removeDevice(ns, name);
    truth.devices.erase(objectKey(ns, name));
    return "removeDevice " + ns + "/" + name;
  }

  std::string upsertVmi() {
    const VirtualMachineInstance* existing = anyOf(truth.vmis);
    VirtualMachineInstance v;
    if (existing && rng.chance(0.7)) {
      v = *existing;
      if (rng.chance(0.1)) {
        oldVmiUids.push_back(v.uid);
        v.uid = fresh("vmi-uid-");  // deleted and re-created under the same name
      }
    } else {
      v = newVmi();
    }
    v.activePods = chooseActivePods(v.ns, objectKey(v.ns, v.name));
    index.upsertVmi(v);
    std::string what = "upsertVmi " + describe(v);
    fx::put(truth, std::move(v));
    return what;
  }

  std::string removeVmi() {
    const VirtualMachineInstance* existing = anyOf(truth.vmis);
    if (!existing) return "removeVmi (none)";
    std::string ns = existing->ns, name = existing->name;
    oldVmiUids.push_back(existing->uid);
    index.removeVmi(ns, name);
    truth.vmis.erase(objectKey(ns, name));
    return "removeVmi " + ns + "/" + name;
  }

  std::string assume() {
    const Pod* existing = anyOf(truth.pods);
    Pod p = existing && rng.chance(0.7) ? *existing : newPod();
    std::string node = rng.chance(0.9) ? rng.pick(nodeNames) : "ghost-node";
    index.assume(p, node);
    // What the assumption should hold: the pod's usage as if bound to `node`.
    LauncherIndex launchers(truth);
    Pod placed = p;
    placed.nodeName = node;
    PodUsage u = podUsage(placed, launchOf(p, launchers), truth);
    assumed.erase(p.uid);
    if (!u.capacity.empty()) assumed[p.uid] = {node, u.capacity};
    return "assume " + describe(p) + " on " + node;
  }

  std::string forget() {
    std::string uid;
    if (!assumed.empty() && rng.chance(0.8)) {
      uid = std::next(assumed.begin(), rng.between(0, static_cast<std::int64_t>(assumed.size()) - 1))->first;
    } else if (const Pod* p = anyOf(truth.pods)) {
      uid = p->uid;
    }
    index.forget(uid);
    assumed.erase(uid);
    return "forget " + uid;
  }

  std::mt19937_64 engine_;  // picks the kind of event; `rng` shapes the objects
};

// ---------------------------------------------------------------------------
// The incremental index equals a recomputation from scratch
// ---------------------------------------------------------------------------

// Fixed seeds keep every run reproducible; a failure message names its seed.
constexpr std::uint64_t kSeeds[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597};
// The event sequences check everything after every event, so they use fewer seeds.
constexpr std::uint64_t kEventSeeds[] = {1, 2, 3, 5, 8, 13, 21, 34};
constexpr int kEventsPerSeed = 150;

TEST(PropertyIndex, FromClusterEqualsRecomputationOnRandomClusters) {
  for (std::uint64_t seed : kEventSeeds) {
    for (double trouble : {0.0, 0.1, 0.4}) {
      Shape shape;
      shape.nodeTrouble = trouble;
      shape.nodes = 6 + static_cast<int>(seed % 7);
      World world(seed, shape);
      UsageIndex index = UsageIndex::fromCluster(world.truth);
      ASSERT_TRUE(indexEqualsRecomputation(index, world.truth, {}, world.namespaceNames))
          << "seed " << seed << " trouble " << trouble;
    }
  }
}

TEST(PropertyIndex, EveryEventKeepsIndexEqualToRecomputation) {
  for (std::uint64_t seed : kEventSeeds) {
    Shape shape;
    shape.secondClassOnPassthrough = seed % 3 == 0;
    EventDriver driver(seed, shape);
    ASSERT_TRUE(indexEqualsRecomputation(driver.index, driver.truth, driver.assumed, driver.namespaceNames))
        << "seed " << seed;
    std::vector<std::string> recent;
    for (int step = 0; step < kEventsPerSeed; ++step) {
      recent.push_back(driver.step());
      if (recent.size() > 4) recent.erase(recent.begin());
      auto ok = indexEqualsRecomputation(driver.index, driver.truth, driver.assumed, driver.namespaceNames);
      if (ok && step % 10 == 9)
        ok = snapshotEqualsRecomputation(driver.index, driver.truth, driver.assumed, driver.namespaceNames);
      if (!ok) {
        std::string trail;
        for (const auto& e : recent) trail += "\n  " + e;
        FAIL() << "seed " << seed << " step " << step << ": " << ok.message() << "\nlast events:" << trail;
      }
    }
  }
}

TEST(PropertyIndex, RebuildAndCopyAgreeWithIncrementalIndexAfterEvents) {
  for (std::uint64_t seed : kEventSeeds) {
    EventDriver driver(seed, Shape{});
    for (int round = 0; round < 3; ++round) {
      for (int step = 0; step < 50; ++step) driver.step();
      // Assumptions live only in the index; a rebuild from the cluster has none.
      UsageIndex rebuilt = UsageIndex::fromCluster(driver.truth);
      ASSERT_TRUE(indexEqualsRecomputation(rebuilt, driver.truth, {}, driver.namespaceNames)) << "seed " << seed;
      EXPECT_EQ(totalsDifference(rebuilt.totals(), driver.index.totals()), "") << "seed " << seed << " round " << round;
      UsageIndex copy = driver.index;
      ASSERT_TRUE(indexEqualsRecomputation(copy, driver.truth, driver.assumed, driver.namespaceNames))
          << "seed " << seed;
      for (const auto& [name, cls] : driver.truth.classes) {
        EXPECT_EQ(copy.poolFreeUnits(copy.cluster(), cls), driver.index.poolFreeUnits(driver.index.cluster(), cls))
            << "seed " << seed << " class " << name;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Placements never exceed a node's units
// ---------------------------------------------------------------------------

// An index over a random cluster with healthy nodes and some raw pods and held
// devices already on them; no budgets, so only capacity decides.
struct Placer : World {
  Placer(std::uint64_t seed, const Shape& shape) : World(seed, shape) {
    truth.hrqs.clear();
    truth.quotas.clear();
    for (auto& [name, cls] : truth.classes) cls.maxCount = 4;
    index = UsageIndex::fromCluster(truth);
  }

  DeviceOrder randomOrder(int maxItems) {
    DeviceOrder order;
    order.ns = rng.pick(namespaceNames);
    order.subject = "vmi/" + order.ns + "/" + fresh("order");
    for (int i = 0, k = static_cast<int>(rng.between(1, maxItems)); i < k; ++i) {
      order.items.push_back(DeviceTemplate{rng.pick(classNames), rng.between(1, 4)});
    }
    return order;
  }

  // Adds the order's devices Bound on the chosen node, as the binder would.
  void bind(const DeviceOrder& order, const std::string& node) {
    for (const auto& item : order.items) {
      GpuDevice d = fx::device(order.ns, fresh("ordered"), item.className, item.count, DevicePhase::Bound, node);
      index.upsertDevice(d);
      fx::put(truth, std::move(d));
    }
  }

  // Units of the class in use on the node, and served by it.
  std::pair<std::int64_t, std::int64_t> usedAndServed(const Node& node, const DeviceClass& cls) const {
    return {index.nodeUsed(node.name, cls.resourceName), unitsServed(node, cls).units};
  }

  // Whether some node has room for the whole set (by a scan of recomputed usage):
  // a GPUDevice of count N holds N units of its class's resource, and classes
  // selling one resource draw on the same units of a node.
  bool someNodeFits(const DeviceOrder& order) const {
    TotalsCapacityView view(truth, computeUsage(truth));
    std::map<std::string, std::int64_t> perResource;
    for (const auto& item : order.items) perResource[truth.classes.at(item.className).resourceName] += item.count;
    for (const auto& [name, node] : truth.nodes) {
      bool fits = true;
      for (const auto& item : order.items) {
        const DeviceClass& cls = truth.classes.at(item.className);
        fits = fits && freeUnits(node, cls, view) >= perResource[cls.resourceName];
      }
      if (fits) return true;
    }
    return false;
  }

  UsageIndex index;
};

Shape placementShape(std::uint64_t seed, bool secondClass) {
  Shape shape;
  shape.nodes = 5 + static_cast<int>(seed % 6);
  shape.pods = 12;
  shape.devices = 6;
  shape.vmis = 3;
  shape.nodeTrouble = 0.1;
  shape.secondClassOnPassthrough = secondClass;
  return shape;
}

// Repeatedly places random device sets and binds them on the chosen node; no
// node that started within its units ever goes past them, and one that started
// past them (raw pods bound over capacity) never gains more.
// Adds to `placed` how many orders were placed.
void placeUntilFull(std::uint64_t seed, bool secondClass, int orders, int& placed) {
  Placer p(seed, placementShape(seed, secondClass));
  std::map<std::pair<std::string, std::string>, std::int64_t> ceiling;  // (node, class) -> max allowed used
  for (const auto& [nodeName, node] : p.truth.nodes) {
    for (const auto& [className, cls] : p.truth.classes) {
      auto [used, served] = p.usedAndServed(node, cls);
      ceiling[{nodeName, className}] = std::max(used, served);
    }
  }
  for (int i = 0; i < orders; ++i) {
    DeviceOrder order = p.randomOrder(2);
    bool fits = p.someNodeFits(order);
    Placement placement = placeDeviceSet(p.index.cluster(), p.index, order);
    if (placement.node) {
      ASSERT_TRUE(placement.decision.allowed()) << "seed " << seed;
      p.bind(order, *placement.node);
      ++placed;
    }
    for (const auto& [nodeName, node] : p.truth.nodes) {
      for (const auto& [className, cls] : p.truth.classes) {
        auto [used, served] = p.usedAndServed(node, cls);
        ASSERT_LE(used, (ceiling[{nodeName, className}]))
            << "seed " << seed << " order " << i << ": node " << nodeName << " uses " << used << " " << cls.resourceName
            << " but serves " << served << " for class " << className << " after placing " << order.subject << " on "
            << placement.node.value_or("(none)");
      }
    }
    // With no budgets, gates or reservations in the way, a set within maxCount is
    // placed exactly when some node has room for all of it.
    bool countsValid = true;
    std::map<std::string, std::int64_t> perClass;
    for (const auto& item : order.items) perClass[item.className] += item.count;
    for (const auto& [c, n] : perClass) countsValid = countsValid && n <= p.truth.classes.at(c).maxCount;
    if (!p.truth.namespaces.contains(order.ns)) {
      // A namespace the cache does not hold has unknown budgets: never placed.
      EXPECT_FALSE(placement.node.has_value())
          << "seed " << seed << " order " << i << " in unknown namespace " << order.ns;
    } else if (unattributedNamespace(p.truth, order.ns)) {
      // Under no Organization: the quantity could not be attributed, never placed.
      EXPECT_FALSE(placement.node.has_value())
          << "seed " << seed << " order " << i << " in unorganized namespace " << order.ns;
    } else if (countsValid) {
      EXPECT_EQ(placement.node.has_value(), fits)
          << "seed " << seed << " order " << i
          << (fits ? " fits a node but was refused: " : " fits no node but was placed") << placement.decision.summary();
    }
  }
}

TEST(PropertyPlacement, PlacedDeviceSetsNeverExceedANodesUnits) {
  int placed = 0;
  for (std::uint64_t seed : kSeeds) {
    placeUntilFull(seed, false, 60, placed);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(placed, 50) << "too few placements: the property was hardly exercised";
}

// ---------------------------------------------------------------------------
// Budgets never exceed hard limits after admitted orders
// ---------------------------------------------------------------------------

// HRQs on random namespaces of the tree and ResourceQuotas on some, with small
// hard limits so that budgets, not capacity, decide most orders.
void addRandomBudgets(World& w) {
  const std::vector<std::string> keys = {quotaKey(kPassthrough), quotaKey(kVgpu), quotaKey(kShared)};
  for (const auto& [name, n] : w.truth.namespaces) {
    if (w.rng.chance(0.6)) {
      HierarchicalResourceQuota q;
      q.ns = name;
      q.name = name == w.truth.namespaces.begin()->first ? std::string(kOrgQuotaName) : "quota";
      for (int i = 0, k = static_cast<int>(w.rng.between(1, 3)); i < k; ++i)
        q.hard.set(w.rng.pick(keys), w.rng.between(0, 8));
      fx::put(w.truth, std::move(q));
    }
    if (w.rng.chance(0.3)) {
      ResourceQuota q;
      q.ns = name;
      q.name = std::string(kProjectQuotaName);
      q.hard.set(w.rng.pick(keys), w.rng.between(0, 6));
      fx::put(w.truth, std::move(q));
    }
  }
}

// The usage each limit may reach: its hard limit, or the usage it started with
// when random holders already put it past the limit (admission never adds to it).
struct Ceilings {
  std::map<std::string, std::int64_t> hrq, rq;  // "ns/name key" -> ceiling

  static std::string id(const std::string& ns, const std::string& name, const std::string& key) {
    return ns + "/" + name + " " + key;
  }

  explicit Ceilings(const Cluster& c) {
    TotalsCapacityView view(c, computeUsage(c));
    for (const auto& [k, q] : c.hrqs) {
      for (const auto& [key, hard] : q.hard) hrq[id(q.ns, q.name, key)] = std::max(hard, view.subtreeUsed(q.ns, key));
    }
    for (const auto& [k, q] : c.quotas) {
      for (const auto& [key, hard] : q.hard) rq[id(q.ns, q.name, key)] = std::max(hard, view.namespaceUsed(q.ns, key));
    }
  }

  // Usage recomputed from scratch (not the index the decisions read) against every ceiling.
  ::testing::AssertionResult hold(const Cluster& c) const {
    TotalsCapacityView view(c, computeUsage(c));
    for (const auto& [k, q] : c.hrqs) {
      for (const auto& [key, hard] : q.hard) {
        std::int64_t used = view.subtreeUsed(q.ns, key);
        if (used > hrq.at(id(q.ns, q.name, key))) {
          return ::testing::AssertionFailure() << "hierarchicalresourcequota " << q.ns << "/" << q.name
                                               << ": subtree uses " << used << " " << key << ", hard " << hard;
        }
      }
    }
    for (const auto& [k, q] : c.quotas) {
      for (const auto& [key, hard] : q.hard) {
        std::int64_t used = view.namespaceUsed(q.ns, key);
        if (used > rq.at(id(q.ns, q.name, key))) {
          return ::testing::AssertionFailure() << "resourcequota " << q.ns << "/" << q.name << ": namespace uses "
                                               << used << " " << key << ", hard " << hard;
        }
      }
    }
    return ::testing::AssertionSuccess();
  }
};

struct Budgeter : Placer {
  Budgeter(std::uint64_t seed, const Shape& shape) : Placer(seed, shape) {
    addRandomBudgets(*this);
    index = UsageIndex::fromCluster(truth);
    Cluster& untracked = index.mutableClusterForUntrackedKinds();
    untracked.hrqs = truth.hrqs;
    untracked.quotas = truth.quotas;
  }

  // A GPU pod the validating webhook would see; kept only when its budgets allow it.
  std::string admitRawPod() {
    Pod p = newPod();
    p.phase = rng.chance(0.8) ? PodPhase::Running : PodPhase::Pending;
    if (!checkPodBudget(index.cluster(), index, p).allowed()) return "refused " + describe(p);
    index.upsertPod(p);
    std::string what = "admitted " + describe(p);
    fx::put(truth, std::move(p));
    return what;
  }

  // Holders go away or stop counting: released devices, deleted or finished pods.
  std::string shrink() {
    if (rng.chance(0.5)) {
      const GpuDevice* existing = anyOf(truth.devices);
      if (!existing) return "nothing to release";
      GpuDevice d = *existing;
      // Lost still counts against the budget; a Released device never comes back.
      d.phase = rng.chance(0.7) || d.phase == DevicePhase::Released ? DevicePhase::Released : DevicePhase::Lost;
      index.upsertDevice(d);
      std::string what = "release " + describe(d);
      fx::put(truth, std::move(d));
      return what;
    }
    const Pod* existing = anyOf(truth.pods);
    if (!existing) return "nothing to delete";
    Pod p = *existing;
    if (rng.chance(0.5)) {
      index.removePod(p.ns, p.name);
      truth.pods.erase(objectKey(p.ns, p.name));
      return "delete " + describe(p);
    }
    p.phase = PodPhase::Succeeded;
    index.upsertPod(p);
    std::string what = "finish " + describe(p);
    fx::put(truth, std::move(p));
    return what;
  }
};

Shape budgetShape(std::uint64_t seed, bool secondClass) {
  Shape shape;
  shape.nodes = 10 + static_cast<int>(seed % 5);
  shape.pods = 15;
  shape.devices = 8;
  shape.vmis = 3;
  shape.nodeTrouble = 0.05;
  shape.secondClassOnPassthrough = secondClass;
  return shape;
}

struct BudgetRun {
  int admitted = 0;
  int refusedForBudget = 0;
};

BudgetRun orderUntilBudgetsBind(std::uint64_t seed, bool secondClass, int actions) {
  Budgeter b(seed, budgetShape(seed, secondClass));
  Ceilings ceilings(b.truth);
  BudgetRun run;
  for (int i = 0; i < actions; ++i) {
    std::string what;
    std::int64_t roll = b.rng.between(0, 99);
    if (roll < 60) {
      DeviceOrder order = b.randomOrder(2);
      Placement placement = placeDeviceSet(b.index.cluster(), b.index, order);
      for (const auto& r : placement.decision.refusals) run.refusedForBudget += r.code == Code::BudgetExceeded;
      if (placement.node) {
        b.bind(order, *placement.node);
        ++run.admitted;
      }
      what = order.subject +
             (placement.node ? " placed on " + *placement.node : " refused: " + placement.decision.summary());
    } else if (roll < 80) {
      what = b.admitRawPod();
    } else {
      what = b.shrink();
    }
    auto held = ceilings.hold(b.truth);
    if (!held) {
      ADD_FAILURE() << "seed " << seed << " action " << i << " (" << what << "): " << held.message();
      return run;
    }
  }
  return run;
}

TEST(PropertyBudget, AdmittedOrdersAndPodsNeverTakeASubtreePastItsHardLimit) {
  BudgetRun total;
  for (std::uint64_t seed : kSeeds) {
    BudgetRun run = orderUntilBudgetsBind(seed, false, 80);
    total.admitted += run.admitted;
    total.refusedForBudget += run.refusedForBudget;
  }
  EXPECT_GT(total.admitted, 50) << "too few admitted orders: the property was hardly exercised";
  EXPECT_GT(total.refusedForBudget, 50) << "budgets hardly ever refused: the property was hardly exercised";
}

// ---------------------------------------------------------------------------
// The extender and the webhooks charge a pod what the usage totals charge it
// ---------------------------------------------------------------------------

// podDemand (extender filter, pod webhook) finds the launcher and its devices
// itself; its budget charge must be the one podUsage gives through
// status.activePods, or a decision and the usage it is checked against disagree.
::testing::AssertionResult demandAgreesWithUsage(const Cluster& c) {
  TotalsCapacityView view(c, computeUsage(c));
  LauncherIndex launchers(c);
  for (const auto& [key, pod] : c.pods) {
    if (isTerminal(pod)) continue;
    Launch launch = launchOf(pod, launchers);
    PodUsage usage = podUsage(pod, launch, c);
    PodDemand demand = podDemand(c, view, pod);
    if (demand.budget != usage.budget || (demand.launcherOf != nullptr) != usage.isLauncher) {
      return ::testing::AssertionFailure()
             << describe(pod) << ": podDemand charges " << describe(demand.budget)
             << (demand.launcherOf ? " as launcher of " + demand.launcherOf->name : "") << " with "
             << demand.attached.size() << " attached device(s); podUsage charges " << describe(usage.budget)
             << (usage.isLauncher ? " as a launcher" : "") << " with " << launch.devices.size()
             << " attached device(s)";
    }
  }
  return ::testing::AssertionSuccess();
}

void demandAgreesAlongEvents(double crossNamespaceAttach) {
  for (std::uint64_t seed : kEventSeeds) {
    Shape shape;
    shape.crossNamespaceAttach = crossNamespaceAttach;
    shape.devices = 16;
    EventDriver driver(seed, shape);
    for (int step = 0; step < kEventsPerSeed; ++step) {
      std::string what = driver.step();
      if (step % 10 != 0) continue;
      auto ok = demandAgreesWithUsage(driver.truth);
      if (!ok) FAIL() << "seed " << seed << " step " << step << " after " << what << ":\n" << ok.message();
    }
  }
}

TEST(PropertyAdmission, PodDemandChargesEveryPodWhatUsageCharges) { demandAgreesAlongEvents(0.0); }

// ---------------------------------------------------------------------------
// Two classes selling one resource name (two pools sharing one quota key, as
// hardQuotaUnits() anticipates); what a bound order holds; coverage by devices
// of another namespace.
// ---------------------------------------------------------------------------

TEST(PropertyPlacement, ClassesSellingOneResourceNeverOverfillANode) {
  for (std::uint64_t seed : kEventSeeds) {
    int placed = 0;
    placeUntilFull(seed, true, 60, placed);
    if (HasFatalFailure()) return;
  }
}

TEST(PropertyBudget, ClassesSharingAQuotaKeyNeverTakeASubtreePastItsHardLimit) {
  for (std::uint64_t seed : kEventSeeds) orderUntilBudgetsBind(seed, true, 80);
}

// A placed order holds on its node, and charges its tenant, exactly the units it
// was admitted for, whatever unit a class counts in: the least capacity a node
// must serve for the order to be placed on it, and the least hard limit that
// admits it, are what the bound devices take.
struct Probe {
  std::int64_t leastUnits = -1;  // least units served by the only node that admit the order
  std::int64_t held = -1;        // nodeUsed after binding it there
  std::int64_t leastHard = -1;   // least HRQ hard limit that admits the order
  std::int64_t charged = -1;     // subtreeUsed after binding it
};

Probe probeOrder(const DeviceClass& cls, std::int64_t count) {
  auto clusterServing = [&](std::int64_t units, std::optional<std::int64_t> hard) {
    Cluster c = fx::syncedCluster();
    fx::put(c, cls);
    Node n = fx::gpuNode("n1", cls.nodeMode, cls.resourceName, units);
    if (cls.allocation == Allocation::Shared) {
      n.inventory.emplace();  // enough healthy GPUs: the advertised shares decide
      for (int i = 0; i < 16; ++i) n.inventory->push_back(InventoryParent{"gpu" + std::to_string(i), true, {}});
    }
    fx::put(c, n);
    fx::put(c, fx::ns("team"));
    if (hard) fx::put(c, fx::hrq("team", "quota", quotaKey(cls.resourceName), *hard));
    return c;
  };
  DeviceOrder order{"team", "vmi/team/vm", {DeviceTemplate{cls.name, count}}};
  auto placeAndBind = [&](const Cluster& c, std::int64_t& held, std::int64_t& charged) {
    UsageIndex index = UsageIndex::fromCluster(c);
    index.mutableClusterForUntrackedKinds().hrqs = c.hrqs;
    Placement placement = placeDeviceSet(index.cluster(), index, order);
    if (!placement.node) return false;
    index.upsertDevice(fx::device("team", "d", cls.name, count, DevicePhase::Bound, *placement.node));
    held = index.nodeUsed(*placement.node, cls.resourceName);
    charged = index.subtreeUsed("team", quotaKey(cls.resourceName));
    return true;
  };
  Probe probe;
  std::int64_t ignored = 0;
  for (std::int64_t units = 0; units <= 32 && probe.leastUnits < 0; ++units) {
    if (placeAndBind(clusterServing(units, std::nullopt), probe.held, ignored)) probe.leastUnits = units;
  }
  for (std::int64_t hard = 0; hard <= 32 && probe.leastHard < 0; ++hard) {
    if (placeAndBind(clusterServing(32, hard), ignored, probe.charged)) probe.leastHard = hard;
  }
  return probe;
}

TEST(PropertyPlacement, BoundOrderHoldsTheUnitsItWasAdmittedFor) {
  for (const DeviceClass& cls : catalogue(false)) {
    for (std::int64_t count = 1; count <= 4; ++count) {
      Probe probe = probeOrder(cls, count);
      SCOPED_TRACE("class " + cls.name + " count " + std::to_string(count));
      ASSERT_GE(probe.leastUnits, 0) << "never placed";
      ASSERT_GE(probe.leastHard, 0) << "never admitted";
      EXPECT_EQ(probe.held, probe.leastUnits)
          << "placed once the node served " << probe.leastUnits << " unit(s); bound, it holds " << probe.held;
      EXPECT_EQ(probe.charged, probe.leastHard)
          << "admitted once the hard limit was " << probe.leastHard << "; bound, it charges " << probe.charged;
    }
  }
}

// The same, when some devices are attached to a VMI of another namespace.
TEST(PropertyAdmission, PodDemandChargesWhatUsageChargesWhenDevicesOfAnotherNamespaceAreAttached) {
  demandAgreesAlongEvents(0.3);
}

}  // namespace
}  // namespace tally::model

namespace tally::model {
namespace {

// The extender filters through a FitTable built per snapshot; it must refuse
// exactly the nodes filterNode refuses, with the same reasons.
TEST(PropertyFitTable, AgreesWithFilterNodeAlongEvents) {
  for (std::uint64_t seed : kEventSeeds) {
    Shape shape;
    shape.devices = 16;
    EventDriver driver(seed, shape);
    for (int step = 0; step < kEventsPerSeed; ++step) {
      std::string what = driver.step();
      if (step % 15 != 0) continue;
      const Cluster& c = driver.index.cluster();
      FitTable table = FitTable::build(c, driver.index);
      for (const auto& [key, pod] : c.pods) {
        if (isTerminal(pod)) continue;
        PodDemand demand = podDemand(c, driver.index, pod);
        for (const auto& [name, node] : c.nodes) {
          auto row = table.find(name);
          ASSERT_TRUE(row) << name;
          NodeVerdict fast = table.filter(c, demand, *row);
          NodeVerdict slow = filterNode(c, driver.index, demand, node);
          ASSERT_EQ(fast.verdict, slow.verdict) << "seed " << seed << " step " << step << " after " << what << ": "
                                                << describe(pod) << " on " << describe(node);
          ASSERT_EQ(fast.reason, slow.reason) << "seed " << seed << " step " << step << ": " << describe(pod);
        }
      }
    }
  }
}

// The extender publishes a FitTable per snapshot: rebuilt when nodes or classes
// change, otherwise updated from the previous one on the nodes the index
// reports touched, over frozen usage. Along random events the updated table
// must equal a fresh build, and the Query's memoised verdicts and scores must
// equal filterNode and scoreNode on every node for every pending pod.
TEST(PropertyFitTable, UpdatedTablesAndQueriesAgreeWithTheModelAlongEvents) {
  for (std::uint64_t seed : kEventSeeds) {
    Shape shape;
    shape.devices = 16;
    EventDriver driver(seed, shape);
    std::shared_ptr<Cluster> base;
    std::optional<UsageSnapshot> usage;
    std::optional<FitTable> table;
    std::size_t updates = 0;
    (void)driver.index.takeTouchedNodes();
    for (int step = 0; step < kEventsPerSeed; ++step) {
      std::string what = driver.step();
      const Cluster& live = driver.index.cluster();
      auto touched = driver.index.takeTouchedNodes();
      bool sameBase = base && base->nodes == live.nodes && base->classes == live.classes &&
                      base->devices == live.devices && base->vmis == live.vmis && base->namespaces == live.namespaces;
      UsageSnapshot next = driver.index.snapshot();
      if (!sameBase || touched.all || !table) {
        base = std::make_shared<Cluster>(live);
        base->pods.clear();
        table.emplace(FitTable::build(*base, next));
      } else {
        FitTable updated = FitTable::update(*table, *base, next, touched.nodes);
        ++updates;
        table.emplace(std::move(updated));
      }
      usage.emplace(std::move(next));
      FitTable fresh = FitTable::build(*base, *usage);
      for (const auto& [key, pod] : live.pods) {
        if (isTerminal(pod) || !pod.nodeName.empty()) continue;
        PodDemand demand = podDemand(*base, *usage, pod);
        auto query = table->query(*base, *usage, demand);
        for (const auto& [name, node] : base->nodes) {
          auto row = table->find(name);
          ASSERT_TRUE(row) << name;
          ASSERT_EQ(fresh.find(name), row);
          NodeVerdict rebuilt = fresh.filter(*base, demand, *row);
          NodeVerdict kept = table->filter(*base, demand, *row);
          ASSERT_EQ(kept.verdict, rebuilt.verdict) << "seed " << seed << " step " << step << " after " << what;
          ASSERT_EQ(kept.reason, rebuilt.reason) << "seed " << seed << " step " << step << " after " << what;
          NodeVerdict slow = filterNode(*base, *usage, demand, node);
          auto answer = query.filter(*row);
          ASSERT_EQ(answer.verdict->verdict, slow.verdict)
              << "seed " << seed << " step " << step << ": " << describe(pod) << " on " << describe(node);
          ASSERT_EQ(answer.verdict->reason, slow.reason) << "seed " << seed << " step " << step;
          for (ScoreStrategy strategy : {ScoreStrategy::BinPack, ScoreStrategy::Spread}) {
            ASSERT_EQ(query.score(*row, strategy), scoreNode(*base, *usage, demand, node, strategy))
                << "seed " << seed << " step " << step << ": " << describe(pod) << " on " << describe(node);
          }
        }
      }
    }
    EXPECT_GT(updates, 0u) << "seed " << seed << ": no step exercised FitTable::update";
  }
}

// findAll remembers which row followed which in the last list and checks that
// guess by name: whatever lists come (one order from rotating starts, subsets,
// shuffles, repeats, names it does not hold, tables sharing one layout), every
// answer must be what find() says of each name.
TEST(PropertyFitTable, FindAllAgreesWithFindWhateverTheOrderOfNames) {
  std::mt19937_64 rng(11);
  Cluster c;
  fx::put(c, fx::passthroughClass());
  std::vector<std::string> names;
  for (int i = 0; i < 700; ++i) {
    names.push_back("node-" + std::to_string(i) + (i % 4 == 0 ? "-with-a-name-past-the-inline-limit" : ""));
    fx::put(c, fx::gpuNode(names.back(), NodeMode::VmPassthrough, fx::kH200, 8));
  }
  auto index = UsageIndex::fromCluster(c);
  FitTable table = FitTable::build(index.cluster(), index);
  std::vector<std::string> order = names;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint32_t> rows;
  std::size_t hits = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> list;
    const std::size_t start = rng() % order.size();
    switch (round % 5) {
      case 0:
      case 1:  // the scheduler's way: one order, a rotating start
        for (std::size_t k = 0; k < order.size(); ++k) list.push_back(order[(start + k) % order.size()]);
        break;
      case 2:  // a subset of it
        for (std::size_t k = 0; k < order.size(); ++k) {
          if (rng() % 3) list.push_back(order[(start + k) % order.size()]);
        }
        break;
      case 3:  // shuffled with repeats
        list = order;
        std::shuffle(list.begin(), list.end(), rng);
        for (int k = 0; k < 50; ++k) list.push_back(list[rng() % list.size()]);
        break;
      default:  // unknown names and near misses
        for (std::size_t k = 0; k < 200; ++k) {
          const std::string& n = order[(start + k) % order.size()];
          list.push_back(rng() % 4 == 0 ? n + "x" : rng() % 4 == 0 ? n.substr(0, n.size() - 1) : n);
        }
    }
    if (round % 50 == 49) order.swap(list.size() == order.size() ? list : order);  // the scheduler's order changes
    std::vector<std::string_view> views(list.begin(), list.end());
    table.findAll(views, rows);
    ASSERT_EQ(rows.size(), list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto expected = table.find(list[i]);
      ASSERT_EQ(rows[i], expected ? *expected : FitTable::kNoRow) << "round " << round << " name " << list[i];
      if (expected) hits += table.nodeName(rows[i]) == list[i];
    }
  }
  EXPECT_GT(hits, 0u);
}

// A list of candidates as kube-scheduler's parallel filter makes it: `order`
// from a rotating `start`, in chunks of 70 that `workers` take in turn, the
// nodes whose index `keep` passes appended as the workers reach them (so runs
// of the order interleave), 500 of them.
template <class Keep>
std::vector<std::string> schedulerList(const std::vector<std::string>& order, std::size_t start, std::size_t workers,
                                       std::mt19937_64& rng, Keep keep) {
  constexpr std::size_t kChunk = 70;
  std::vector<std::size_t> at(workers), end(workers);
  std::size_t nextChunk = 0;
  for (std::size_t w = 0; w < workers; ++w, ++nextChunk) {
    at[w] = nextChunk * kChunk;
    end[w] = at[w] + kChunk;
  }
  std::vector<std::string> list;
  while (list.size() < 500) {
    const std::size_t w = rng() % workers;
    if (at[w] == end[w]) {
      at[w] = nextChunk * kChunk;
      end[w] = at[w] + kChunk;
      ++nextChunk;
    }
    const std::size_t k = (start + at[w]++) % order.size();
    if (keep(k)) list.push_back(order[k]);
  }
  return list;
}

// kube-scheduler's lists as its parallel filter makes them: its node list (an
// order of its own, here a shuffle) from a rotating start, in chunks that
// workers take in turn, the feasible nodes appended as the workers find them,
// so runs of that order interleave. findAll follows the runs: after the first
// lists few names go by hash, and every answer is still find()'s.
TEST(PropertyFitTable, FindAllFollowsInterleavedRunsOfTheSchedulersOrder) {
  std::mt19937_64 rng(23);
  Cluster c;
  fx::put(c, fx::passthroughClass());
  std::vector<std::string> order;
  for (int i = 0; i < 5000; ++i) {
    order.push_back("bench-" + std::to_string(i));
    fx::put(c, fx::gpuNode(order.back(), NodeMode::VmPassthrough, fx::kH200, 8));
  }
  std::shuffle(order.begin(), order.end(), rng);
  auto index = UsageIndex::fromCluster(c);
  FitTable table = FitTable::build(index.cluster(), index);
  std::vector<std::uint32_t> rows;
  std::size_t names = 0, probes = 0;
  for (int round = 0; round < 400; ++round) {
    const std::size_t start = rng() % order.size();
    // The nodes ending in 7 never fit.
    const std::vector<std::string> list =
        schedulerList(order, start, 1 + round % 3, rng, [&](std::size_t k) { return order[k].back() != '7'; });
    std::vector<std::string_view> views(list.begin(), list.end());
    const std::size_t before = FitTable::findAllProbesOnThisThread();
    table.findAll(views, rows);
    if (round >= 100) {  // once most of the order has been seen
      names += list.size();
      probes += FitTable::findAllProbesOnThisThread() - before;
    }
    ASSERT_EQ(rows.size(), list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      ASSERT_EQ(rows[i], *table.find(list[i])) << "round " << round << " name " << list[i];
    }
  }
  // A run starts at every chunk a worker takes (one in about 63 names) and
  // where the rotating start wraps around.
  EXPECT_LT(probes * 20, names) << probes << " of " << names << " names by hash";
}

// The API server lists nodes by name, and kube-scheduler keeps that order
// within a zone: the table's own row order. Lists in it (interleaved runs
// from rotating starts) resolve by the row after each run's last without
// the remembered order, even right after lists in another order taught
// different successors, and every answer is still find()'s.
TEST(PropertyFitTable, FindAllFollowsTheTablesOwnOrderWithoutRemembering) {
  std::mt19937_64 rng(31);
  Cluster c;
  fx::put(c, fx::passthroughClass());
  std::vector<std::string> byName;
  for (int i = 0; i < 3000; ++i) {
    byName.push_back("gpu-" + std::to_string(i) + (i % 5 == 0 ? "-with-a-name-past-the-inline-limit" : ""));
    fx::put(c, fx::gpuNode(byName.back(), NodeMode::VmPassthrough, fx::kH200, 8));
  }
  std::sort(byName.begin(), byName.end());
  auto index = UsageIndex::fromCluster(c);
  FitTable table = FitTable::build(index.cluster(), index);
  std::vector<std::uint32_t> rows;
  auto check = [&](const std::vector<std::string>& list) {
    std::vector<std::string_view> views(list.begin(), list.end());
    const std::size_t before = FitTable::findAllProbesOnThisThread();
    table.findAll(views, rows);
    EXPECT_EQ(rows.size(), list.size());
    for (std::size_t i = 0; i < list.size() && i < rows.size(); ++i) {
      EXPECT_EQ(rows[i], *table.find(list[i])) << list[i];
    }
    return FitTable::findAllProbesOnThisThread() - before;
  };
  // Teach the remembered order a shuffle of the names, twice (confirmed).
  std::vector<std::string> shuffled = byName;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  check(shuffled);
  check(shuffled);
  std::size_t names = 0, probes = 0;
  for (int round = 0; round < 50; ++round) {
    const std::size_t start = rng() % byName.size();
    const std::vector<std::string> list = schedulerList(byName, start, 2, rng, [](std::size_t) { return true; });
    names += list.size();
    probes += check(list);
  }
  // A run starts where a worker takes a chunk (one in 70 names) and where
  // the rotating start wraps around; the learned shuffle is never asked.
  EXPECT_LT(probes * 25, names) << probes << " of " << names << " names by hash";
}

// kube-scheduler lists only the nodes its own filters pass: full nodes (in a
// bin-packed cluster, one in twenty and more), tainted or cordoned ones drop
// out of its name order and leave gaps in the runs. A gap of a few rows is
// still the table's own order: findAll looks a few rows on before it turns
// to the remembered order (whose loads miss the cache when the rows are
// cold) or to the hash, and every answer is still find()'s.
TEST(PropertyFitTable, FindAllStepsOverTheNodesTheSchedulerDropped) {
  std::mt19937_64 rng(37);
  Cluster c;
  fx::put(c, fx::passthroughClass());
  std::vector<std::string> byName;
  for (int i = 0; i < 3000; ++i) {
    byName.push_back("bench-" + std::to_string(i));
    fx::put(c, fx::gpuNode(byName.back(), NodeMode::VmPassthrough, fx::kH200, 8));
  }
  std::sort(byName.begin(), byName.end());
  // The same nodes drop out of every list, as full nodes stay full: one in
  // twenty alone, and runs of two and three.
  std::vector<bool> dropped(byName.size(), false);
  for (std::size_t k = 0; k < byName.size(); ++k) {
    if (rng() % 20 == 0) dropped[k] = true;
    if (rng() % 200 == 0 && k + 2 < byName.size()) dropped[k] = dropped[k + 1] = dropped[k + 2] = true;
  }
  auto index = UsageIndex::fromCluster(c);
  FitTable table = FitTable::build(index.cluster(), index);
  std::vector<std::uint32_t> rows;
  std::size_t names = 0, probes = 0, remembered = 0;
  for (int round = 0; round < 50; ++round) {
    const std::size_t start = rng() % byName.size();
    const std::vector<std::string> list =
        schedulerList(byName, start, 2, rng, [&](std::size_t k) { return !dropped[k]; });
    std::vector<std::string_view> views(list.begin(), list.end());
    const std::size_t probesBefore = FitTable::findAllProbesOnThisThread();
    const std::size_t rememberedBefore = FitTable::findAllRememberedOnThisThread();
    table.findAll(views, rows);
    probes += FitTable::findAllProbesOnThisThread() - probesBefore;
    remembered += FitTable::findAllRememberedOnThisThread() - rememberedBefore;
    ASSERT_EQ(rows.size(), list.size());
    for (std::size_t i = 0; i < list.size(); ++i) EXPECT_EQ(rows[i], *table.find(list[i])) << list[i];
    names += list.size();
  }
  EXPECT_LT(probes * 25, names) << probes << " of " << names << " names by hash";
  EXPECT_LT(remembered * 100, names) << remembered << " of " << names << " names along the remembered order";
}

// ---------------------------------------------------------------------------
// The invariant and unreadable inputs (issue 13)
// ---------------------------------------------------------------------------

// Random ledgers (every state, some pools), organizations with and without
// their HRQ: the reserved term is exactly the pending+active+releasing records
// of the pool, and an organization whose add-ons grant in the pool but whose
// HRQ is missing makes the equation unknown (never "hard 0").
TEST(PropertyInvariant, ReservedTermIsPendingActiveAndReleasingRecordsAndMissingHrqsAreUnknown) {
  static const std::vector<ReservationState> states = {ReservationState::Pending, ReservationState::Active,
                                                       ReservationState::Releasing, ReservationState::Released,
                                                       ReservationState::Canceled};
  int unknownSeen = 0, knownSeen = 0;
  for (std::uint64_t seed : kSeeds) {
    World w(seed, Shape{});
    Addon quota;
    quota.id = "quota";
    for (const auto& name : w.classNames) quota.gpu[name] = GpuGrant{1, 0, 0, 0};
    w.truth.plans->addons[quota.id] = quota;
    std::map<std::string, std::int64_t> expected;
    for (int i = 0, n = static_cast<int>(w.rng.between(0, 8)); i < n; ++i) {
      auto r = fx::record("rec-" + std::to_string(i), "org" + std::to_string(w.rng.between(0, 2)),
                          w.rng.pick(w.classNames), w.rng.between(1, 3), w.rng.pick(states));
      if (holdsCapacity(r.state)) expected[r.profileId] += r.devices;
      w.truth.ledger.records.push_back(r);
    }
    std::set<std::string> missing;
    for (int o = 0; o < 3; ++o) {
      std::string name = "org" + std::to_string(o);
      if (!w.truth.namespaces.contains(name)) continue;
      fx::put(w.truth, fx::org(name, {{"quota", w.rng.between(0, 2)}}));
      if (w.rng.chance(0.3)) {
        missing.insert(name);
      } else {
        fx::put(w.truth, fx::hrq(name, "plan-quota", quotaKey(kPassthrough), w.rng.between(0, 4)));
      }
    }
    for (const auto& [name, cls] : w.truth.classes) {
      PoolInvariant inv = evaluateInvariant(w.truth, cls);
      std::int64_t reserved = 0;
      for (const auto& source : inv.reserved.sources) reserved += source.quantity;
      ASSERT_EQ(inv.reserved.units, expected[name] * unitsPerDevice(cls)) << "seed " << seed << " pool " << name;
      ASSERT_EQ(reserved, inv.reserved.units) << "seed " << seed << " pool " << name;
      bool shouldBeUnknown = false;
      for (const auto& [key, org] : w.truth.organizations) {
        shouldBeUnknown = shouldBeUnknown || (missing.contains(org.name) && grantsInPool(w.truth, org, cls));
      }
      ASSERT_EQ(!inv.unknown.empty(), shouldBeUnknown) << "seed " << seed << " pool " << name << ": " << inv.equation();
      if (shouldBeUnknown) {
        ++unknownSeen;
        ASSERT_FALSE(inv.holds());
        auto findings = auditPool(w.truth, cls);
        ASSERT_TRUE(std::any_of(findings.begin(), findings.end(),
                                [](const Finding& f) { return f.code == FindingCode::QuotaUnknown; }))
            << "seed " << seed << " pool " << name;
        ASSERT_FALSE(evaluateGate(w.truth, cls, findings).open);
      } else {
        ++knownSeen;
      }
    }
  }
  EXPECT_GT(unknownSeen, 5) << "missing HRQs hardly exercised";
  EXPECT_GT(knownSeen, 5);
}

// No budget check passes when an input it needs cannot be read: an unsynced
// namespace, HRQ or ResourceQuota cache, or a namespace the cache does not hold.
TEST(PropertyBudget, NoBudgetCheckPassesWithAnUnreadableInput) {
  int checks = 0;
  for (std::uint64_t seed : kSeeds) {
    World w(seed, Shape{});
    TotalsCapacityView view(w.truth, computeUsage(w.truth));
    for (int i = 0; i < 40; ++i) {
      Cluster c = w.truth;
      std::string nsName = w.rng.pick(w.namespaceNames);
      int broken = static_cast<int>(w.rng.between(0, 3));
      if (broken == 0) c.caches[Kind::Namespace].synced = false;
      if (broken == 1) c.caches[Kind::HierarchicalResourceQuota].synced = false;
      if (broken == 2) c.caches[Kind::ResourceQuota].synced = false;
      if (broken == 3) nsName = "unknown-" + std::to_string(i);  // synced cache, namespace absent
      std::string key = quotaKey(w.rng.pick(kResources));
      auto refusal = checkBudget(c, view, nsName, BudgetAsk{key, w.rng.between(0, 3), 0});
      ASSERT_TRUE(refusal) << "seed " << seed << ": a budget of " << nsName << " passed with input " << broken
                           << " unreadable";
      ASSERT_TRUE(refusal->code == Code::BudgetUnknown || refusal->code == Code::NamespaceUnknown) << refusal->message;
      // And the doors built on it refuse too.
      Pod p = fx::gpuPod(nsName, "probe-" + std::to_string(i), kPassthrough, 1);
      ASSERT_FALSE(checkPodBudget(c, view, p).allowed()) << "seed " << seed;
      ++checks;
    }
  }
  EXPECT_GT(checks, 500);
}

// Preemption is the filter's own decision: whatever victims narrowVictims names
// on a node, the filter accepts the pod there once they are gone; when it names
// none (no target), even evicting every candidate leaves the node refused.
TEST(PropertyPreempt, VictimsNamedAreExactlyWhatMakesTheFilterAcceptTheNode) {
  int targets = 0, refusedTargets = 0;
  for (std::uint64_t seed : kSeeds) {
    Shape shape;
    shape.pods = 40;
    World w(seed, shape);
    // Budgets and an idle reservation in the way, sometimes.
    for (const auto& name : w.namespaceNames) {
      if (w.truth.namespaces.contains(name) && w.rng.chance(0.3)) {
        fx::put(w.truth, fx::hrq(name, "cap", quotaKey(w.rng.pick(kResources)), w.rng.between(0, 6)));
      }
    }
    TotalsCapacityView view(w.truth, computeUsage(w.truth));
    for (int i = 0; i < 12; ++i) {
      Pod pending;
      pending.ns = w.rng.pick(w.namespaceNames);
      pending.name = "preemptor-" + std::to_string(i);
      pending.uid = "preemptor-uid-" + std::to_string(i);
      pending.phase = PodPhase::Pending;
      randomiseRequests(w.rng, pending);
      PodDemand demand = podDemand(w.truth, view, pending);
      for (const auto& [nodeName, node] : w.truth.nodes) {
        std::vector<const Pod*> candidates;
        for (const auto& [key, p] : w.truth.pods) {
          if (p.nodeName == nodeName && !isTerminal(p)) candidates.push_back(&p);
        }
        auto kept = narrowVictims(w.truth, view, demand, node, candidates);
        Cluster without = w.truth;
        for (const Pod* v : kept ? *kept : candidates) without.pods.erase(objectKey(v->ns, v->name));
        TotalsCapacityView afterView(without, computeUsage(without));
        Verdict after =
            filterNode(without, afterView, podDemand(without, afterView, pending), without.nodes.at(nodeName)).verdict;
        if (kept) {
          ++targets;
          ASSERT_EQ(after, Verdict::Fits) << "seed " << seed << " " << describe(pending) << " on " << describe(node)
                                          << ": " << kept->size() << " victim(s) named but the filter still refuses";
        } else {
          ++refusedTargets;
          ASSERT_NE(after, Verdict::Fits) << "seed " << seed << " " << describe(pending) << " on " << describe(node)
                                          << ": no target, yet evicting every candidate would make it fit";
        }
      }
    }
  }
  EXPECT_GT(targets, 50);
  EXPECT_GT(refusedTargets, 50);
}

}  // namespace
}  // namespace tally::model
