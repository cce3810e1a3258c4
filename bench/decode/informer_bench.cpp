// Informer cache cost at scale: 10,000 nodes and 150,000 pods in Stores with
// a by-node index; resident memory per object; apply + publish latency per
// event (one event per snapshot, the worst case) and per event in batches;
// snapshot loads by concurrent readers while the writer publishes.
//
//   tally-informer-bench [--pods 150000] [--nodes 10000] [--template pods_watch.pb]

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <malloc.h>
#include <time.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/protobuf_watch.hpp"
#include "tally/runtime/store.hpp"
#include "tally/runtime/testing/slim_pod.hpp"

using namespace tally::runtime;
using codecs::SlimPod;
using codecs::SlimPodCodec;
using Clock = std::chrono::steady_clock;

namespace {

double rssMiB() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

std::vector<SlimPod> templates(const std::string& path) {
  std::vector<SlimPod> out;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  ProtobufWatchDecoder<SlimPodCodec> decoder;
  (void)decoder.feed(data, [&](WatchEvent<SlimPod>&& ev) {
    if (ev.object && out.size() < 1000) out.push_back(std::move(*ev.object));
  });
  if (out.empty()) {  // no recording: a synthetic pod of the same shape
    // No recording: the same shape as the recorded pods.
    std::string json =
        R"({"metadata":{"name":"x","namespace":"bench","labels":{"app":"trainer-7","team":"team-3",)"
        R"("tier":"batch","pod-template-hash":"5d8f7c9b1"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"Job",)"
        R"("name":"job-7","uid":"00000000-0000-4000-8000-000000000007","controller":true}]},"spec":{"schedulerName":)"
        R"("default-scheduler","overhead":{"cpu":"250m","memory":"64Mi"},"initContainers":[{"name":"fetch-dataset",)"
        R"("resources":{"requests":{"cpu":"500m","memory":"512Mi"},"limits":{"cpu":"1","memory":"1Gi"}}},)"
        R"({"name":"log-shipper","restartPolicy":"Always","resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}],)"
        R"("containers":[{"name":"main","resources":{"requests":{"cpu":"16","memory":"128Gi","nvidia.com/gpu":"2"},)"
        R"("limits":{"memory":"128Gi","nvidia.com/gpu":"2"}}},{"name":"exporter","resources":{"requests":)"
        R"({"cpu":"50m","memory":"64Mi"}}}]},"status":{"phase":"Running"}})";
    auto p = decodeJsonObject<SlimPodCodec>(json);
    if (p) out.push_back(std::move(*p));
  }
  return out;
}

SlimPod makePod(const std::vector<SlimPod>& tpl, size_t i, int nodes, uint64_t rv) {
  SlimPod p = tpl[i % tpl.size()];
  p.metadata.name = "trainer-" + std::to_string(i) + "-7f9c4";
  p.metadata.ns = "team-" + std::to_string(i % 300);
  char uid[40];
  std::snprintf(uid, sizeof uid, "%08zx-5f2e-4c1e-9a55-%012zx", i, i * 2654435761u);
  p.metadata.uid = uid;
  p.metadata.resourceVersion = std::to_string(rv);
  p.nodeName = Atom("gpu-node-" + std::to_string(i % static_cast<size_t>(nodes)));
  return p;
}

MetaObject makeNode(int i) {
  MetaObject n;
  n.metadata.name = "gpu-node-" + std::to_string(i);
  n.metadata.uid = "node-uid-" + std::to_string(i);
  n.metadata.resourceVersion = std::to_string(1000 + i);
  n.metadata.labels = {{"kubernetes.io/hostname", n.metadata.name},
                       {"node.kubernetes.io/instance-type", "gpu-h200-8x"},
                       {"topology.kubernetes.io/zone", "zone-" + std::to_string(i % 3)},
                       {"nvidia.com/gpu.product", "NVIDIA-H200"},
                       {"nvidia.com/gpu.count", "8"},
                       {"gpu.tally.dev/pool", "pool-" + std::to_string(i % 20)}};
  return n;
}

// CPU time of this thread: robust to preemption on a loaded machine.
double threadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"informer store benchmark"};
  size_t podCount = 150'000;
  int nodeCount = 10'000;
  int events = 20'000;
  std::string tplPath;
  app.add_option("--pods", podCount);
  app.add_option("--nodes", nodeCount);
  app.add_option("--events", events);
  app.add_option("--template", tplPath);
  CLI11_PARSE(app, argc, argv);

  const auto tpl = templates(tplPath);
  malloc_trim(0);
  const double rss0 = rssMiB();

  Store<MetaCodec> nodes;
  {
    std::vector<MetaObject> all;
    for (int i = 0; i < nodeCount; ++i) all.push_back(makeNode(i));
    nodes.replace(std::move(all), "1");
    nodes.publish();
  }
  malloc_trim(0);
  const double rssNodes = rssMiB();

  Store<SlimPodCodec> pods;
  pods.addIndex("node", [](const SlimPod& p) { return std::vector<std::string>{p.nodeName.str()}; });
  uint64_t rv = 100'000;
  double loadSeconds = 0;
  {
    std::vector<SlimPod> all;
    all.reserve(podCount);
    for (size_t i = 0; i < podCount; ++i) all.push_back(makePod(tpl, i, nodeCount, ++rv));
    const auto t0 = Clock::now();
    pods.replace(std::move(all), std::to_string(rv));
    pods.publish();
    loadSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  malloc_trim(0);
  const double rssPods = rssMiB();

  // Readers load snapshots and look pods up while the writer publishes.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0};
  std::thread reader([&] {
    size_t i = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      auto snap = pods.snapshot();
      i = (i + 7919) % podCount;
      const SlimPod* p = snap->get("team-" + std::to_string(i % 300) + "/trainer-" + std::to_string(i) + "-7f9c4");
      if (p) reads.fetch_add(1, std::memory_order_relaxed);
    }
  });

  // One event per published snapshot: a pod moves to another node.
  std::vector<double> perEventUs;
  perEventUs.reserve(static_cast<size_t>(events));
  double singleCpuUs = 0;
  const auto loopStart = Clock::now();
  for (int e = 0; e < events; ++e) {
    const size_t i = (static_cast<size_t>(e) * 104729u) % podCount;
    SlimPod p = makePod(tpl, i, nodeCount, ++rv);
    p.nodeName = Atom("gpu-node-" + std::to_string((i + 1 + static_cast<size_t>(e)) % static_cast<size_t>(nodeCount)));
    const double c0 = threadCpuUs();
    const auto t0 = Clock::now();
    pods.apply(EventType::kModified, std::move(p));
    pods.publish();
    perEventUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    singleCpuUs += threadCpuUs() - c0;
  }
  const double singleSeconds = std::chrono::duration<double>(Clock::now() - loopStart).count();
  const uint64_t readsDuringSingle = reads.load();

  // Batches of 100 events per snapshot (what one network read usually carries under load).
  constexpr int kBatch = 100;
  std::vector<SlimPod> updates;
  updates.reserve(static_cast<size_t>(events));
  for (int e = 0; e < events; ++e)
    updates.push_back(makePod(tpl, (static_cast<size_t>(e) * 7877u) % podCount, nodeCount, ++rv));
  const double batchCpu0 = threadCpuUs();
  const auto batchStart = Clock::now();
  for (int e = 0; e < events; ++e) {
    pods.apply(EventType::kModified, std::move(updates[static_cast<size_t>(e)]));
    if ((e + 1) % kBatch == 0) pods.publish();
  }
  pods.publish();
  const double batchUs = std::chrono::duration<double, std::micro>(Clock::now() - batchStart).count() / events;
  const double batchCpuUs = (threadCpuUs() - batchCpu0) / events;
  stop = true;
  reader.join();
  malloc_trim(0);
  const double rssEnd = rssMiB();

  double mean = 0;
  for (double v : perEventUs) mean += v;
  mean /= static_cast<double>(perEventUs.size());
  const auto snap = pods.snapshot();
  std::printf("objects: %d nodes, %zu pods (%zu in snapshot, %zu on gpu-node-0)\n", nodeCount, podCount, snap->size(),
              snap->byIndex("node", "gpu-node-0").size());
  std::printf(
      "rss_baseline_MiB=%.1f rss_nodes_MiB=%.1f rss_pods_MiB=%.1f rss_total_MiB=%.1f rss_after_events_MiB=%.1f\n", rss0,
      rssNodes - rss0, rssPods - rssNodes, rssPods, rssEnd);
  std::printf("bytes_per_node=%.0f bytes_per_pod=%.0f\n", (rssNodes - rss0) * 1048576.0 / nodeCount,
              (rssPods - rssNodes) * 1048576.0 / static_cast<double>(podCount));
  std::printf("initial_load_publish_s=%.3f\n", loadSeconds);
  std::printf(
      "apply_publish_per_event_us mean=%.2f p50=%.2f p99=%.2f max=%.2f (1 event per snapshot, %d events, %.0f "
      "events/s)\n",
      mean, percentile(perEventUs, 0.5), percentile(perEventUs, 0.99), percentile(perEventUs, 1.0), events,
      events / singleSeconds);
  std::printf("apply_publish_per_event_cpu_us single=%.2f batched=%.2f (writer thread CPU time)\n",
              singleCpuUs / events, batchCpuUs);
  std::printf("apply_publish_per_event_us_batched=%.2f (batches of %d, wall)\n", batchUs, kBatch);
  std::printf("reader_snapshot_lookups_per_s=%.0f (one reader thread, during single-event publishing)\n",
              static_cast<double>(readsDuringSingle) / singleSeconds);
  return 0;
}
