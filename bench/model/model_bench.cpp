// Micro-benchmarks of the shared GPU model at 10,000 nodes / 150,000 pods:
// building the incremental UsageIndex, one event's update, the per-node fit
// query (filterNode with a prepared podDemand, and raw nodeUsed lookups), a
// filter pass over 5,000 nodes, and the index's resident memory.
//
// TALLY_BENCH_SCALE=<d> divides the cluster size by d (the CTest smoke run
// uses 100: 100 nodes / 1,500 pods).

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/index.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {
namespace {

const std::string kPassthrough = "nvidia.com/GH100_H200_SXM_141GB";
const std::string kVgpu = "nvidia.com/A100-10C";
const std::string kShared = "nvidia.com/gpu";

constexpr int kFullNodes = 10'000;
constexpr int kFullPods = 150'000;
constexpr int kFilterNodes = 5'000;

struct Scale {
  int nodes;
  int pods;
};

Scale scale() {
  int divisor = 1;
  if (const char* s = std::getenv("TALLY_BENCH_SCALE")) divisor = std::max(1, std::atoi(s));
  return {std::max(10, kFullNodes / divisor), std::max(150, kFullPods / divisor)};
}

DeviceClass makeClass(std::string name, Allocation allocation, std::string resource, NodeMode mode) {
  DeviceClass c;
  c.name = std::move(name);
  c.allocation = allocation;
  c.workload = allocation == Allocation::Shared ? Workload::Pod : Workload::Vm;
  c.resourceName = std::move(resource);
  c.nodeMode = mode;
  c.memoryMiB = allocation == Allocation::Shared ? 16384 : 144384;
  c.maxCount = 8;
  if (allocation == Allocation::Shared) c.share = SharePolicy{8192, 25, 4};
  return c;
}

// The cluster the benchmarks share: 40% passthrough nodes (8 GPUs), 30% vGPU
// nodes (2 parents x 8 slots in the inventory annotation), 30% shared nodes
// (4 GPUs, 2 shares each); an HNC tree of 50 organizations x 4 projects x 2
// teams; 15 pods per node, one in five asking for a GPU of its node's kind and
// one in twenty finished; on every VM node one VMI whose launcher pod is
// covered by an Attached GPUDevice.
struct World {
  Cluster cluster;
  std::vector<std::string> nodeNames;
  std::vector<std::string> gpuPodKeys;  // pods with a GPU request, bound
  std::vector<std::string> deviceKeys;  // attached devices
  std::vector<std::string> namespaces;

  explicit World(Scale s) {
    cluster.now = 1'800'000'000;
    cluster.markAllSynced();
    cluster.plans = BillingPlans{};
    for (auto c : {makeClass("h200", Allocation::Passthrough, kPassthrough, NodeMode::VmPassthrough),
                   makeClass("a100-10c", Allocation::Vgpu, kVgpu, NodeMode::VmVgpu),
                   makeClass("v100-8g", Allocation::Shared, kShared, NodeMode::PodHami)}) {
      cluster.classes[c.name] = c;
    }
    for (int o = 0; o < 50; ++o) {
      std::string org = "org" + std::to_string(o);
      addNamespace(org, {});
      HierarchicalResourceQuota q;
      q.ns = org;
      q.name = std::string(kOrgQuotaName);
      q.hard.set(quotaKey(kPassthrough), 1'000'000);
      q.hard.set(quotaKey(kShared), 1'000'000);
      cluster.hrqs[objectKey(q.ns, q.name)] = q;
      for (int p = 0; p < 4; ++p) {
        std::string project = org + "-p" + std::to_string(p);
        addNamespace(project, {org});
        for (int t = 0; t < 2; ++t) addNamespace(project + "-t" + std::to_string(t), {project, org});
      }
    }
    for (int i = 0; i < s.nodes; ++i) {
      Node n;
      n.name = "node" + std::to_string(i);
      n.ready = true;
      int kind = i % 10;
      if (kind < 4) {
        n.activeMode = n.expectedMode = NodeMode::VmPassthrough;
        n.allocatable.set(kPassthrough, 8);
      } else if (kind < 7) {
        n.activeMode = n.expectedMode = NodeMode::VmVgpu;
        n.allocatable.set(kVgpu, 16);
        n.inventory.emplace();
        for (int g = 0; g < 2; ++g) {
          InventoryParent parent{n.name + "-gpu" + std::to_string(g), true, {}};
          parent.types[kVgpu] = VgpuSlots{8, 2, 6};
          n.inventory->push_back(parent);
        }
      } else {
        n.activeMode = n.expectedMode = NodeMode::PodHami;
        n.allocatable.set(kShared, 8);
        n.inventory.emplace();
        for (int g = 0; g < 4; ++g)
          n.inventory->push_back(InventoryParent{n.name + "-gpu" + std::to_string(g), true, {}});
      }
      nodeNames.push_back(n.name);
      cluster.nodes[n.name] = std::move(n);
    }
    int podsPerNode = s.pods / s.nodes;
    int serial = 0;
    for (int i = 0; i < s.nodes; ++i) {
      const Node& node = cluster.nodes.at(nodeNames[static_cast<std::size_t>(i)]);
      const std::string& resource = node.allocatable.entries().front().first;
      const std::string& ns = namespaces[static_cast<std::size_t>(i) % namespaces.size()];
      std::string launcherUid;
      for (int k = 0; k < podsPerNode; ++k) {
        Pod p;
        p.ns = ns;
        p.name = "pod" + std::to_string(serial);
        p.uid = "pod-uid-" + std::to_string(serial);
        ++serial;
        p.nodeName = node.name;
        p.phase = k % 20 == 19 ? PodPhase::Succeeded : PodPhase::Running;
        ResourceList main;
        main.set("cpu", 2);
        if (k % 5 == 0) main.set(resource, 1);
        p.containers.push_back(main);
        if (k % 7 == 0) p.initContainers.push_back(InitContainer{ResourceList{{"cpu", 1}}, k % 14 == 0});
        if (k % 5 == 0 && k != 0) gpuPodKeys.push_back(objectKey(p.ns, p.name));
        if (k == 0) launcherUid = p.uid;
        cluster.pods[objectKey(p.ns, p.name)] = std::move(p);
      }
      if (node.activeMode == NodeMode::PodHami || launcherUid.empty()) continue;
      VirtualMachineInstance vmi;
      vmi.ns = ns;
      vmi.name = "vm-" + node.name;
      vmi.uid = "vmi-uid-" + node.name;
      vmi.phase = "Running";
      vmi.activePods[launcherUid] = node.name;
      GpuDevice d;
      d.ns = ns;
      d.name = "gpu-" + node.name;
      d.uid = "dev-uid-" + node.name;
      d.className = node.activeMode == NodeMode::VmPassthrough ? "h200" : "a100-10c";
      d.count = 1;
      d.phase = DevicePhase::Attached;
      d.node = node.name;
      d.attachedTo = ObjectRef{vmi.ns, vmi.name, vmi.uid};
      deviceKeys.push_back(objectKey(d.ns, d.name));
      cluster.devices[objectKey(d.ns, d.name)] = std::move(d);
      cluster.vmis[objectKey(vmi.ns, vmi.name)] = std::move(vmi);
    }
  }

  void addNamespace(const std::string& name, const std::vector<std::string>& ancestors) {
    Namespace n;
    n.name = name;
    n.tree[name] = 0;
    int depth = 1;
    for (const auto& a : ancestors) n.tree[a] = depth++;
    cluster.namespaces[name] = std::move(n);
    namespaces.push_back(name);
  }
};

World& world() {
  static World w(scale());
  return w;
}

UsageIndex& sharedIndex() {
  static UsageIndex index = UsageIndex::fromCluster(world().cluster);
  return index;
}

// Resident set size of this process, from /proc/self/status (kB -> bytes).
std::int64_t residentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  }
  return -1;
}

std::int64_t heapBytes() { return static_cast<std::int64_t>(mallinfo2().uordblks); }

// --- Memory ------------------------------------------------------------------

// Runs first, before any other index exists, so freed memory does not mask growth.
void BM_IndexResidentMemory(benchmark::State& state) {
  const Cluster& cluster = world().cluster;
  for (auto _ : state) {
    malloc_trim(0);
    std::int64_t rss0 = residentBytes(), heap0 = heapBytes();
    auto copy = std::make_unique<Cluster>(cluster);  // what the index stores of the objects
    std::int64_t rss1 = residentBytes(), heap1 = heapBytes();
    copy.reset();
    malloc_trim(0);
    std::int64_t rss2 = residentBytes(), heap2 = heapBytes();
    auto index = std::make_unique<UsageIndex>(UsageIndex::fromCluster(cluster));
    std::int64_t rss3 = residentBytes(), heap3 = heapBytes();
    benchmark::DoNotOptimize(index.get());
    constexpr double MiB = 1024.0 * 1024.0;
    state.counters["cluster_copy_rss_MiB"] = static_cast<double>(rss1 - rss0) / MiB;
    state.counters["cluster_copy_heap_MiB"] = static_cast<double>(heap1 - heap0) / MiB;
    state.counters["index_rss_MiB"] = static_cast<double>(rss3 - rss2) / MiB;
    state.counters["index_heap_MiB"] = static_cast<double>(heap3 - heap2) / MiB;
    state.counters["index_heap_B_per_pod"] =
        static_cast<double>(heap3 - heap2) / static_cast<double>(cluster.pods.size());
  }
  state.counters["nodes"] = static_cast<double>(cluster.nodes.size());
  state.counters["pods"] = static_cast<double>(cluster.pods.size());
}
BENCHMARK(BM_IndexResidentMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

// --- Build -------------------------------------------------------------------

void BM_IndexBuild(benchmark::State& state) {
  const Cluster& cluster = world().cluster;
  for (auto _ : state) {
    UsageIndex index = UsageIndex::fromCluster(cluster);
    benchmark::DoNotOptimize(&index);
  }
  state.counters["pods"] = static_cast<double>(cluster.pods.size());
}
BENCHMARK(BM_IndexBuild)->Unit(benchmark::kMillisecond);

// For comparison: what every decision would cost without the index.
void BM_RecomputeFromScratch(benchmark::State& state) {
  const Cluster& cluster = world().cluster;
  for (auto _ : state) {
    UsageTotals totals = computeUsage(cluster);
    benchmark::DoNotOptimize(&totals);
  }
}
BENCHMARK(BM_RecomputeFromScratch)->Unit(benchmark::kMillisecond);

// --- One event ----------------------------------------------------------------

// A GPU pod re-bound to another node (its charge leaves one node and lands on another).
void BM_EventPodMovesNode(benchmark::State& state) {
  UsageIndex& index = sharedIndex();
  const World& w = world();
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& key = w.gpuPodKeys[i % w.gpuPodKeys.size()];
    Pod pod = index.cluster().pods.at(key);
    const std::string& original = w.cluster.pods.at(key).nodeName;
    pod.nodeName = pod.nodeName == original ? w.nodeNames[(i * 7919) % w.nodeNames.size()] : original;
    index.upsertPod(pod);
    ++i;
  }
  for (std::size_t k = 0; k < i && k < w.gpuPodKeys.size(); ++k) index.upsertPod(w.cluster.pods.at(w.gpuPodKeys[k]));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventPodMovesNode);

// The same event without the copy of the pod out of the index (the informer hands one over).
void BM_EventPodUpsertOnly(benchmark::State& state) {
  UsageIndex& index = sharedIndex();
  const World& w = world();
  std::vector<Pod> moved[2];
  for (std::size_t k = 0; k < 1024 && k < w.gpuPodKeys.size(); ++k) {
    Pod pod = w.cluster.pods.at(w.gpuPodKeys[k]);
    moved[0].push_back(pod);
    pod.nodeName = w.nodeNames[(k * 7919) % w.nodeNames.size()];
    moved[1].push_back(pod);
  }
  std::size_t i = 0;
  for (auto _ : state) {
    std::size_t k = i % moved[0].size();
    index.upsertPod(moved[(i / moved[0].size()) % 2 == 0 ? 1 : 0][k]);
    ++i;
  }
  for (const auto& pod : moved[0]) index.upsertPod(pod);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventPodUpsertOnly);

// A device attaching to (and detaching from) its VMI, which re-charges the VMI's launcher pod.
void BM_EventDeviceAttach(benchmark::State& state) {
  UsageIndex& index = sharedIndex();
  const World& w = world();
  std::vector<GpuDevice> bound, attached;
  for (std::size_t k = 0; k < 1024 && k < w.deviceKeys.size(); ++k) {
    GpuDevice d = w.cluster.devices.at(w.deviceKeys[k]);
    attached.push_back(d);
    d.phase = DevicePhase::Bound;
    d.attachedTo = ObjectRef{};
    bound.push_back(d);
  }
  std::size_t i = 0;
  for (auto _ : state) {
    std::size_t k = i % bound.size();
    index.upsertDevice((i / bound.size()) % 2 == 0 ? bound[k] : attached[k]);
    ++i;
  }
  for (const auto& d : attached) index.upsertDevice(d);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventDeviceAttach);

// An in-flight placement and its withdrawal (the extender's bind path).
void BM_EventAssumeForget(benchmark::State& state) {
  UsageIndex& index = sharedIndex();
  const World& w = world();
  Pod pod;
  pod.ns = w.namespaces.front();
  pod.name = "pending";
  pod.uid = "pending-uid";
  pod.containers.push_back(ResourceList{{kPassthrough, 1}});
  std::size_t i = 0;
  for (auto _ : state) {
    index.assume(pod, w.nodeNames[(i * 10) % w.nodeNames.size()]);
    index.forget(pod.uid);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventAssumeForget);

// --- Fit queries ----------------------------------------------------------------

void BM_NodeUsedLookup(benchmark::State& state) {
  const UsageIndex& index = sharedIndex();
  const World& w = world();
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(index.nodeUsed(w.nodeNames[i % w.nodeNames.size()], kPassthrough));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_NodeUsedLookup);

Pod pendingGpuPod(const World& w) {
  Pod pod;
  pod.ns = w.namespaces[5];
  pod.name = "pending-h200";
  pod.uid = "pending-h200-uid";
  pod.phase = PodPhase::Pending;
  pod.containers.push_back(ResourceList{{kPassthrough, 2}, {"cpu", 4}});
  return pod;
}

// Worked out once per scheduling request: requests, launcher, budgets, pool gates.
void BM_PodDemand(benchmark::State& state) {
  const UsageIndex& index = sharedIndex();
  Pod pod = pendingGpuPod(world());
  for (auto _ : state) {
    PodDemand demand = podDemand(index.cluster(), index, pod);
    benchmark::DoNotOptimize(&demand);
  }
}
BENCHMARK(BM_PodDemand);

// The filter of one node for a prepared demand (cycling over every node).
void BM_FilterNode(benchmark::State& state) {
  const UsageIndex& index = sharedIndex();
  const Cluster& cluster = index.cluster();
  std::vector<const Node*> nodes;
  for (const auto& [name, node] : cluster.nodes) nodes.push_back(&node);
  Pod pod = pendingGpuPod(world());
  PodDemand demand = podDemand(cluster, index, pod);
  std::size_t i = 0, fits = 0;
  for (auto _ : state) {
    NodeVerdict v = filterNode(cluster, index, demand, *nodes[i % nodes.size()]);
    fits += v.verdict == Verdict::Fits;
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["fit_ratio"] = static_cast<double>(fits) / static_cast<double>(std::max<std::size_t>(1, i));
}
BENCHMARK(BM_FilterNode);

// The extender's filter call: podDemand once, then filterNode over 5,000 candidate nodes.
void BM_FilterPass5000(benchmark::State& state) {
  const UsageIndex& index = sharedIndex();
  const Cluster& cluster = index.cluster();
  std::vector<const Node*> candidates;
  for (const auto& [name, node] : cluster.nodes) {
    if (candidates.size() == static_cast<std::size_t>(kFilterNodes)) break;
    candidates.push_back(&node);
  }
  Pod pod = pendingGpuPod(world());
  std::size_t fits = 0;
  for (auto _ : state) {
    PodDemand demand = podDemand(cluster, index, pod);
    fits = 0;
    for (const Node* node : candidates) fits += filterNode(cluster, index, demand, *node).verdict == Verdict::Fits;
    benchmark::DoNotOptimize(fits);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(candidates.size()));
  state.counters["candidates"] = static_cast<double>(candidates.size());
  state.counters["fits"] = static_cast<double>(fits);
}
BENCHMARK(BM_FilterPass5000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tally::model

BENCHMARK_MAIN();
