// DRA pools at scale, side by side with a device-plugin pool of the same size
// in one run (bench/model/README.md, "DRA"):
//  * the incremental index built from 1,000 nodes x 10 ResourceSlices of 8
//    GPUs (10,000 slices) and 50,000 allocated ResourceClaims, against the
//    same 80,000 GPUs as node allocatable held by 50,000 GPUDevices;
//  * the resident memory each adds to the process;
//  * the claim door (checkClaimAtCreate) on that index, p50/p99, against the
//    GPUDevice door (checkDeviceOrder) on the device-plugin one, with 0 and
//    with 1,000 claims waiting for the allocator;
//  * one slice event (a driver republishing a node's slice) applied.
//
// TALLY_BENCH_SCALE=<d> divides the cluster by d (the CTest smoke run: 100).

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/claim_admission.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/index.hpp"
#include "tally/model/units.hpp"

namespace tally::model {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kDriver = "gpu.example.com";
constexpr const char* kDeviceClass = "h200.example.com";
constexpr const char* kPluginResource = "nvidia.com/GH100_H200_SXM_141GB";

struct Scale {
  int nodes = 1'000;
  int slicesPerNode = 10;
  int devicesPerSlice = 8;
  int claims = 50'000;
  int waiting = 1'000;
  int reviews = 2'000;
};

Scale scale() {
  Scale s;
  if (const char* d = std::getenv("TALLY_BENCH_SCALE")) {
    const int divisor = std::max(1, std::atoi(d));
    s.nodes = std::max(2, s.nodes / divisor);
    s.claims = std::max(10, s.claims / divisor);
    s.waiting = std::max(1, s.waiting / divisor);
    s.reviews = std::max(50, s.reviews / divisor);
  }
  return s;
}

std::size_t heapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// 50 organizations of 4 projects; every claim or device in a project.
void tenants(Cluster& c, std::vector<std::string>& projects) {
  for (int o = 0; o < 50; ++o) {
    const std::string org = "org" + std::to_string(o);
    Namespace root;
    root.name = org;
    root.tree[org] = 0;
    c.namespaces[org] = root;
    for (int p = 0; p < 4; ++p) {
      Namespace project;
      project.name = org + "-p" + std::to_string(p);
      project.tree[project.name] = 0;
      project.tree[org] = 1;
      c.namespaces[project.name] = project;
      projects.push_back(project.name);
    }
    HierarchicalResourceQuota q;
    q.ns = org;
    q.name = std::string(kOrgQuotaName);
    q.hard.set(quotaKey(draImplicitResourceName(kDeviceClass)), 1'000'000);
    q.hard.set(quotaKey(kPluginResource), 1'000'000);
    c.hrqs[objectKey(q.ns, q.name)] = q;
  }
}

Cluster base(std::vector<std::string>& projects) {
  Cluster c;
  c.now = 1'800'000'000;
  c.markAllSynced();
  c.plans = BillingPlans{};
  c.tenancy.unorganized = UnorganizedGpuPolicy::Allow;
  tenants(c, projects);
  return c;
}

ResourceClaim claim(const std::string& ns, const std::string& name, std::int64_t count) {
  ResourceClaim r;
  r.ns = ns;
  r.name = name;
  r.uid = "uid-" + name;
  DraRequest request;
  request.name = "gpu";
  DraRequestChoice choice;
  choice.deviceClassName = kDeviceClass;
  choice.count = count;
  request.choices.push_back(choice);
  r.requests.push_back(request);
  return r;
}

ResourceSlice slice(const Scale& s, int node, int k) {
  ResourceSlice out;
  out.name = "node" + std::to_string(node) + "-" + std::to_string(k);
  out.driver = kDriver;
  out.pool = "node" + std::to_string(node);
  out.nodeName = out.pool;
  out.generation = 1;
  out.resourceSliceCount = s.slicesPerNode;
  for (int d = 0; d < s.devicesPerSlice; ++d) {
    DraDevice device;
    device.name = "gpu-" + std::to_string(k * s.devicesPerSlice + d);
    device.attributes["gpu.example.com/productName"] = "H200";
    device.capacity["memory"].value = 141LL << 30;
    out.devices.push_back(std::move(device));
  }
  return out;
}

// The DRA world: slices and allocated claims, one device each, spread.
Cluster draWorld(const Scale& s, std::vector<std::string>& projects) {
  Cluster c = base(projects);
  DeviceClass cls;
  cls.name = "h200-dra";
  cls.workload = Workload::Pod;
  cls.allocation = Allocation::Passthrough;
  cls.nodeMode = NodeMode::Unset;
  cls.maxCount = 8;
  cls.dra = DraSelection{kDriver, kDeviceClass, {{"productName", "H200"}}, ""};
  cls.resourceName = draImplicitResourceName(kDeviceClass);
  c.classes[cls.name] = cls;
  for (int n = 0; n < s.nodes; ++n) {
    Node node;
    node.name = "node" + std::to_string(n);
    node.ready = true;
    c.nodes[node.name] = node;
    for (int k = 0; k < s.slicesPerNode; ++k) {
      ResourceSlice sl = slice(s, n, k);
      c.resourceSlices[sl.name] = std::move(sl);
    }
  }
  const int perNode = s.slicesPerNode * s.devicesPerSlice;
  for (int i = 0; i < s.claims; ++i) {
    const int node = i % s.nodes;
    const int device = (i / s.nodes) % perNode;
    ResourceClaim r = claim(projects[i % projects.size()], "claim-" + std::to_string(i), 1);
    r.allocated = true;
    r.allocatedNode = "node" + std::to_string(node);
    r.results.push_back(DraResult{"gpu", kDriver, r.allocatedNode, "gpu-" + std::to_string(device)});
    c.resourceClaims[objectKey(r.ns, r.name)] = std::move(r);
  }
  for (int i = 0; i < s.waiting; ++i) {
    ResourceClaim r = claim(projects[i % projects.size()], "waiting-" + std::to_string(i), 1);
    c.resourceClaims[objectKey(r.ns, r.name)] = std::move(r);
  }
  return c;
}

// The same GPUs by device plugin, held by GPUDevices (the peer of a claim).
Cluster pluginWorld(const Scale& s, std::vector<std::string>& projects) {
  Cluster c = base(projects);
  DeviceClass cls;
  cls.name = "h200";
  cls.workload = Workload::Vm;
  cls.allocation = Allocation::Passthrough;
  cls.nodeMode = NodeMode::VmPassthrough;
  cls.maxCount = 8;
  cls.resourceName = kPluginResource;
  c.classes[cls.name] = cls;
  for (int n = 0; n < s.nodes; ++n) {
    Node node;
    node.name = "node" + std::to_string(n);
    node.ready = true;
    node.activeMode = node.expectedMode = NodeMode::VmPassthrough;
    node.allocatable.set(kPluginResource, s.slicesPerNode * s.devicesPerSlice);
    c.nodes[node.name] = node;
  }
  for (int i = 0; i < s.claims; ++i) {
    GpuDevice d;
    d.ns = projects[i % projects.size()];
    d.name = "device-" + std::to_string(i);
    d.uid = "uid-" + d.name;
    d.className = "h200";
    d.count = 1;
    d.phase = DevicePhase::Bound;
    d.node = "node" + std::to_string(i % s.nodes);
    c.devices[objectKey(d.ns, d.name)] = std::move(d);
  }
  return c;
}

struct Built {
  UsageIndex index;
  double seconds = 0;
  double heapMiB = 0;
};

Built build(const Cluster& cluster) {
  malloc_trim(0);
  const std::size_t before = heapInUse();
  const auto t0 = Clock::now();
  Built b{UsageIndex::fromCluster(cluster)};
  b.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  b.heapMiB = mib(heapInUse() - std::min(before, heapInUse()));
  return b;
}

struct Percentiles {
  double p50 = 0, p99 = 0;
};

template <class F>
Percentiles time(int n, F&& decide) {
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    decide(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[std::min(us.size() - 1, us.size() * 99 / 100)]};
}

int run() {
  const Scale s = scale();
  std::vector<std::string> projects;
  malloc_trim(0);
  std::size_t before = heapInUse();
  Cluster dra = draWorld(s, projects);
  const double draObjectsMiB = mib(heapInUse() - std::min(before, heapInUse()));
  std::vector<std::string> pluginProjects;
  before = heapInUse();
  Cluster plugin = pluginWorld(s, pluginProjects);
  const double pluginObjectsMiB = mib(heapInUse() - std::min(before, heapInUse()));

  Built draIndex = build(dra);
  Built pluginIndex = build(plugin);
  std::printf(
      "DRA bench: %d nodes, %zu ResourceSlices of %d GPUs, %d allocated claims + %d waiting; peer: the same "
      "GPUs as allocatable, %d Bound GPUDevices\n",
      s.nodes, dra.resourceSlices.size(), s.devicesPerSlice, s.claims, s.waiting, s.claims);
  std::printf("%-44s %12s %12s %8s\n", "", "DRA", "plugin", "ratio");
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "objects, heap MiB", draObjectsMiB, pluginObjectsMiB,
              draObjectsMiB / std::max(0.01, pluginObjectsMiB));
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "index (snapshot state), heap MiB", draIndex.heapMiB, pluginIndex.heapMiB,
              draIndex.heapMiB / std::max(0.01, pluginIndex.heapMiB));
  std::printf("%-44s %12.3f %12.3f %8.2f\n", "index built from scratch, s", draIndex.seconds, pluginIndex.seconds,
              draIndex.seconds / std::max(1e-9, pluginIndex.seconds));

  const Cluster& draLive = draIndex.index.cluster();
  const Cluster& pluginLive = pluginIndex.index.cluster();
  int admitted = 0;
  Percentiles claimDoor = time(s.reviews, [&](int i) {
    ResourceClaim r = claim(projects[i % projects.size()], "new-" + std::to_string(i), 1 + i % 4);
    admitted += checkClaimAtCreate(draLive, draIndex.index, r, "resourceclaim/x").allowed();
  });
  int ordered = 0;
  Percentiles deviceDoor = time(s.reviews, [&](int i) {
    DeviceOrder order{pluginProjects[i % pluginProjects.size()], "gpudevice/x", {{"h200", 1 + i % 4}}};
    ordered += checkDeviceOrder(pluginLive, pluginIndex.index, order).allowed();
  });
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "door p50, us (claim vs GPUDevice order)", claimDoor.p50, deviceDoor.p50,
              claimDoor.p50 / std::max(1e-9, deviceDoor.p50));
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "door p99, us", claimDoor.p99, deviceDoor.p99,
              claimDoor.p99 / std::max(1e-9, deviceDoor.p99));
  std::printf("%-44s %12d %12d\n", "admitted of the reviews", admitted, ordered);

  // A driver republishing one node's slice (a new generation of one slice:
  // the pool unknown until the others follow) and back.
  Percentiles sliceEvent = time(std::min(s.reviews, 200), [&](int i) {
    ResourceSlice sl = slice(s, i % s.nodes, 0);
    sl.generation = 1 + (i / s.nodes) % 2;
    draIndex.index.upsertResourceSlice(sl);
  });
  Percentiles nodeEvent = time(std::min(s.reviews, 200), [&](int i) {
    Node n = pluginLive.nodes.at("node" + std::to_string(i % s.nodes));
    n.allocatable.set(kPluginResource, s.slicesPerNode * s.devicesPerSlice - (i / s.nodes) % 2);
    pluginIndex.index.upsertNode(n);
  });
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "slice event vs node event p50, us", sliceEvent.p50, nodeEvent.p50,
              sliceEvent.p50 / std::max(1e-9, nodeEvent.p50));
  std::printf("%-44s %12.1f %12.1f %8.2f\n", "slice event vs node event p99, us", sliceEvent.p99, nodeEvent.p99,
              sliceEvent.p99 / std::max(1e-9, nodeEvent.p99));
  // The bench checks its own figures: every new claim of 1..4 fits somewhere
  // while the pools have room, as every order does.
  if (admitted == 0 || ordered == 0) {
    std::fprintf(stderr, "dra bench: no claim (%d) or order (%d) admitted: the worlds are not comparable\n", admitted,
                 ordered);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tally::model

int main() { return tally::model::run(); }
