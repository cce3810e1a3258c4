// bench_controller: tally-controller's decisions at 1,000 and 5,000 nodes.
//  * the GPUDevice webhook (the real handler on a snapshot) over HTTPS, served
//    by the runtime's server with a generated certificate and called by a
//    keep-alive HTTPS client with AdmissionReview CREATE bodies;
//  * the binder's decision loop over the admitted orders, Pending in the
//    snapshot (placeHeldDevice, then hold on a HeldAheadView);
//  * side by side on the same snapshot: the webhook's decision and the
//    extender's filter for an equivalent raw pod (podDemand + filterNode over
//    every node, and the FitTable query the shipped extender runs);
//  * agreement: every admitted order is placeable, the binder's node passes
//    the extender's filter for a pod asking the same units, refused orders
//    leave the raw pod no node. Any disagreement exits 1.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "bench_cluster.hpp"
#include "https_client.hpp"
#include "tally/common/log.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/placement.hpp"
#include "tally/runtime/admission/certificates.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/state/writer.hpp"

using namespace tally;
using namespace tally::bench;
namespace admission = tally::runtime::admission;
namespace http = tally::runtime::http;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::vector<std::size_t> nodeCounts{1000, 5000};
  std::size_t orders = 1000;
  std::size_t requests = 10000;
  std::size_t iterations = 500;
  std::size_t binderRounds = 3;
  unsigned serverThreads = 4;  // tally-controller's --threads default
};

struct Summary {
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};

Summary summarize(std::vector<double> us) {
  Summary s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.p50 = us[us.size() / 2];
  s.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  s.max = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean = sum / static_cast<double>(us.size());
  return s;
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void report(const char* what, std::size_t nodes, const Summary& s) {
  std::printf("  %-52s nodes=%-5zu p50=%9.1f us  p99=%9.1f us  max=%9.1f us  mean=%9.1f us\n", what, nodes, s.p50,
              s.p99, s.max, s.mean);
  std::fflush(stdout);
}

std::unique_ptr<state::Writer> loaded(const model::Cluster& cluster) {
  auto writer = std::make_unique<state::Writer>(state::Writer::Options{});
  state::upsertCluster(*writer, cluster);
  writer->flush();
  return writer;
}

// A disagreement found: counted, and printed once per kind with its example.
struct Disagreements {
  std::size_t count = 0;
  void add(const std::string& what) {
    if (count++ < 10) std::printf("  DISAGREEMENT: %s\n", what.c_str());
  }
};

// Serving certificate and key for 127.0.0.1 signed by a fresh CA, in `dir`.
struct ServingFiles {
  std::string caPem;
  http::TlsFiles files;
};

ServingFiles servingFiles(const std::filesystem::path& dir) {
  auto ca = admission::makeCa({});
  if (!ca) throw std::runtime_error("CA: " + ca.error().describe());
  admission::ServingRequest request;
  request.commonName = "tally-controller-bench";
  request.ipAddresses = {"127.0.0.1"};
  auto serving = admission::issueServingCertificate(*ca, request);
  if (!serving) throw std::runtime_error("serving certificate: " + serving.error().describe());
  ServingFiles out;
  out.caPem = ca->certPem;
  out.files.certFile = (dir / "tls.crt").string();
  out.files.keyFile = (dir / "tls.key").string();
  std::ofstream(out.files.certFile) << serving->certPem;
  std::ofstream(out.files.keyFile) << serving->keyPem;
  return out;
}

bool answeredAllowed(const std::string& body) { return body.find("\"allowed\":true") != std::string::npos; }

void measureHttps(const Options& o, std::size_t nodes, const SnapshotCell<state::Snapshot>& cell,
                  const std::vector<std::string>& reviews, const std::vector<bool>& admitted,
                  Disagreements& disagreements) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tally-bench-controller-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ServingFiles tls = servingFiles(dir);

  observability::Registry registry;
  http::Router router;
  admission::WebhookOptions wo;
  wo.metrics = std::make_shared<admission::WebhookMetrics>(registry);
  admission::addWebhook(router, std::string(controller::kGpuDeviceWebhookPath), "gpudevices",
                        controller::gpuDeviceWebhook(cell, {std::string(controller::kDefaultControllerIdentity),
                                                            &controller::gpuDeviceRefusalMetric(registry)}),
                        wo);
  http::ServerOptions so;
  so.threads = o.serverThreads;
  so.threadName = "tally-webhook";
  so.tls = tls.files;
  // What the server itself spends per request, beside what the client sees.
  std::mutex handledMu;
  std::vector<double> handled;
  http::Observer observer;
  observer.onResponse = [&](std::string_view, int, double seconds, double) {
    std::lock_guard lock(handledMu);
    handled.push_back(seconds * 1e6);
  };
  http::Server server(so, std::move(router), observer);
  server.start();

  {
    HttpsClient client("127.0.0.1", server.port(), tls.caPem);
    const std::string target(controller::kGpuDeviceWebhookPath);
    std::string response;
    const std::size_t warmup = std::min<std::size_t>(50, o.requests);
    std::vector<double> us;
    us.reserve(o.requests);
    std::size_t matching = 0;
    Clock::time_point started;
    for (std::size_t i = 0; i < warmup + o.requests; ++i) {
      if (i == warmup) {
        started = Clock::now();
        std::lock_guard lock(handledMu);
        handled.clear();
      }
      const std::size_t k = i % reviews.size();
      auto t0 = Clock::now();
      int status = client.post(target, reviews[k], response);
      auto t1 = Clock::now();
      if (i < warmup) continue;
      us.push_back(micros(t1 - t0));
      if (status == 200 && answeredAllowed(response) == admitted[k]) {
        ++matching;
      } else {
        disagreements.add("HTTPS answer " + std::to_string(status) + " " + response.substr(0, 200) +
                          " differs from the in-process decision (" + (admitted[k] ? "allowed" : "refused") + ")");
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    report("webhook over HTTPS, one keep-alive connection", nodes, summarize(us));
    {
      std::lock_guard lock(handledMu);
      report("  of which the server (header read to response ready)", nodes, summarize(handled));
    }
    std::printf("  %-52s nodes=%-5zu %.0f requests/s (%zu requests in %.2f s)\n", "webhook over HTTPS, throughput",
                nodes, static_cast<double>(us.size()) / seconds, us.size(), seconds);
    std::printf("  agreement: HTTPS answers matching the in-process decision %zu/%zu\n", matching, us.size());
  }
  server.stop();
  std::filesystem::remove_all(dir);
}

int runSize(const Options& o, std::size_t nodes) {
  Disagreements disagreements;
  std::printf("== %zu nodes (8 H200 each, vm-passthrough), %zu orders to place\n", nodes, o.orders);
  const model::Cluster base = benchCluster(nodes);
  const std::vector<Order> orders = benchOrders(o.orders);
  auto writer = loaded(base);
  auto snap = writer->snapshots().read();
  const model::Cluster& cluster = snap->cluster();
  {
    std::int64_t used = 0;
    for (const auto& [name, node] : cluster.nodes) used += snap->usage.nodeUsed(name, kH200);
    std::printf("  cluster: %zu GPUDevices held, %zu pods, %zu VMIs, %zu namespaces; %lld of %zu units in use\n",
                base.devices.size(), base.pods.size(), base.vmis.size(), base.namespaces.size(),
                static_cast<long long>(used), nodes * kUnitsPerNode);
  }

  // The webhook's answer to every order, in-process, on the snapshot.
  std::vector<std::string> reviews;
  std::vector<admission::AdmissionRequest> requests;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    reviews.push_back(createReview(orders[i].device, i));
    auto decoded = admission::decodeAdmissionReview(reviews.back());
    if (!decoded) {
      std::printf("  review %zu does not decode: %s\n", i, decoded.error().describe().c_str());
      return 1;
    }
    requests.push_back(std::move(decoded).value());
  }
  const controller::GpuDeviceWebhookOptions webhookOptions;
  std::vector<bool> admitted(orders.size());
  std::size_t admittedCount = 0, refusedCount = 0, budgetRefusals = 0;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    admission::AdmissionResponse r = controller::reviewGpuDevice(*snap, requests[i], webhookOptions);
    admitted[i] = r.allowed;
    if (r.allowed) {
      ++admittedCount;
    } else {
      ++refusedCount;
      if (r.message.find("[BudgetExceeded]") != std::string::npos) ++budgetRefusals;
    }
    if (r.allowed != orders[i].withinBudget) {
      disagreements.add("order " + orders[i].device.name + (r.allowed ? " admitted" : " refused: " + r.message) +
                        (orders[i].withinBudget ? ", its tenant has budget" : ", its tenant has none"));
    }
  }
  const std::size_t expectedRefused = orders.size() - o.orders;
  std::printf(
      "  agreement: reviewed %zu: admitted %zu (expected %zu), refused %zu (BudgetExceeded %zu, expected %zu)\n",
      orders.size(), admittedCount, o.orders, refusedCount, budgetRefusals, expectedRefused);
  if (budgetRefusals != expectedRefused) disagreements.add("refusals other than the exhausted budget's");

  // Side by side on this snapshot: the webhook's decision and the extender's
  // filter for a raw pod asking the same units (cycling over the same orders).
  {
    admission::WebhookOptions wo;
    observability::Registry registry;
    wo.metrics = std::make_shared<admission::WebhookMetrics>(registry);
    const admission::WebhookHandler handler = [&](const admission::AdmissionRequest& r) {
      return controller::reviewGpuDevice(*snap, r, webhookOptions);
    };
    std::vector<double> route, decide, filterPass, fitPass;
    std::vector<std::string_view> names;
    for (const auto& [name, node] : cluster.nodes) names.push_back(name);
    std::vector<std::uint32_t> rows;
    snap->fit.findAll(names, rows);
    std::vector<model::FitTable::Query::Answer> answers;
    std::vector<model::Pod> pods;
    for (const auto& order : orders) pods.push_back(rawPodFor(order.device));
    std::size_t fitsSeen = 0;
    for (std::size_t i = 0; i < o.iterations + 20; ++i) {
      const std::size_t k = i % orders.size();
      auto t0 = Clock::now();
      http::Response answered = admission::answerReview("gpudevices", handler, reviews[k], wo);
      auto t1 = Clock::now();
      admission::AdmissionResponse r = controller::reviewGpuDevice(*snap, requests[k], webhookOptions);
      auto t2 = Clock::now();
      model::PodDemand demand = model::podDemand(cluster, snap->usage, pods[k]);
      std::size_t fits = 0;
      for (const auto& [name, node] : cluster.nodes) {
        fits += model::filterNode(cluster, snap->usage, demand, node).verdict == model::Verdict::Fits;
      }
      auto t3 = Clock::now();
      model::PodDemand shippedDemand = model::podDemand(cluster, snap->usage, pods[k]);
      auto query = snap->fit.query(cluster, snap->usage, shippedDemand);
      query.filterAll(rows, answers);
      auto t4 = Clock::now();
      std::size_t fitsInTable = 0;
      for (const auto& a : answers) fitsInTable += a.verdict && a.verdict->verdict == model::Verdict::Fits;
      if (answered.status != 200 || r.allowed != admitted[k] || fits != fitsInTable) {
        disagreements.add("order " + orders[k].device.name + ": route " + std::to_string(answered.status) +
                          ", filterNode fits " + std::to_string(fits) + ", FitTable fits " +
                          std::to_string(fitsInTable));
      }
      fitsSeen += fits;
      if (i < 20) continue;
      route.push_back(micros(t1 - t0));
      decide.push_back(micros(t2 - t1));
      filterPass.push_back(micros(t3 - t2));
      fitPass.push_back(micros(t4 - t3));
    }
    std::printf("  in-process, same snapshot, same %zu orders in turn (%zu iterations):\n", orders.size(),
                o.iterations);
    report("webhook route: decode + reviewGpuDevice + encode", nodes, summarize(route));
    report("webhook decision: reviewGpuDevice", nodes, summarize(decide));
    report("extender filter: podDemand + filterNode x all nodes", nodes, summarize(filterPass));
    report("extender filter as shipped: podDemand + FitTable", nodes, summarize(fitPass));
    std::printf("  ratio filter pass / webhook decision (p50): filterNode %.2f, FitTable %.2f\n",
                summarize(filterPass).p50 / summarize(decide).p50, summarize(fitPass).p50 / summarize(decide).p50);
    if (fitsSeen == 0) disagreements.add("the raw pods fit nowhere: the comparison is empty");
  }

  // Refused orders: the raw pod asking the same units gets no node either.
  std::size_t refusedNoNode = 0;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    if (admitted[i]) continue;
    model::Pod pod = rawPodFor(orders[i].device);
    model::PodDemand demand = model::podDemand(cluster, snap->usage, pod);
    std::size_t fits = 0;
    for (const auto& [name, node] : cluster.nodes) {
      fits += model::filterNode(cluster, snap->usage, demand, node).verdict == model::Verdict::Fits;
    }
    if (fits == 0) {
      ++refusedNoNode;
    } else {
      disagreements.add("order " + orders[i].device.name + " refused, but its raw pod fits " + std::to_string(fits) +
                        " node(s)");
    }
  }
  std::printf("  agreement: refused %zu, the extender's filter leaves the raw pod no node %zu/%zu\n", refusedCount,
              refusedNoNode, refusedCount);

  measureHttps(o, nodes, writer->snapshots(), reviews, admitted, disagreements);

  // The binder: the admitted orders Pending in the snapshot it decides on.
  model::Cluster withOrders = base;
  std::vector<std::string> pending;
  for (std::size_t i = 0; i < orders.size(); ++i) {
    if (!admitted[i]) continue;
    const model::GpuDevice& d = orders[i].device;
    pending.push_back(model::objectKey(d.ns, d.name));
    withOrders.devices[pending.back()] = d;
  }
  auto binderWriter = loaded(withOrders);
  auto binderSnap = binderWriter->snapshots().read();
  const model::Cluster& bc = binderSnap->cluster();
  std::vector<std::string> chosen(pending.size());
  std::vector<double> rates;
  std::vector<double> perPlacement;
  for (std::size_t round = 0; round < o.binderRounds; ++round) {
    model::HeldAheadView view(bc, binderSnap->usage);
    std::size_t placed = 0;
    auto started = Clock::now();
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const model::GpuDevice& d = bc.devices.at(pending[i]);
      auto t0 = Clock::now();
      model::Placement p = model::placeHeldDevice(bc, view, d);
      if (p.node) {
        view.hold(d, *p.node);
        ++placed;
      }
      if (round == 0) {
        perPlacement.push_back(micros(Clock::now() - t0));
        chosen[i] = p.node.value_or("");
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    rates.push_back(static_cast<double>(placed) / seconds);
    std::printf("  binder round %zu: %zu of %zu placed in %.1f ms: %.0f placements/s\n", round + 1, placed,
                pending.size(), seconds * 1e3, rates.back());
  }
  report("binder: placeHeldDevice + hold, per order", nodes, summarize(perPlacement));
  std::sort(rates.begin(), rates.end());
  std::printf("  %-52s nodes=%-5zu %.0f placements/s (median of %zu rounds of %zu orders)\n", "binder decision loop",
              nodes, rates[rates.size() / 2], rates.size(), pending.size());

  // The same loop again, checked against the extender's filter before each hold.
  {
    model::HeldAheadView view(bc, binderSnap->usage);
    std::size_t placeable = 0, fits = 0, same = 0;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const model::GpuDevice& d = bc.devices.at(pending[i]);
      model::Placement p = model::placeHeldDevice(bc, view, d);
      if (!p.node) {
        disagreements.add("admitted order " + pending[i] + " is not placeable: " + p.decision.summary());
        continue;
      }
      ++placeable;
      if (*p.node == chosen[i]) {
        ++same;
      } else {
        disagreements.add("order " + pending[i] + " placed on " + *p.node + ", on " + chosen[i] + " the first time");
      }
      model::Pod pod = rawPodFor(d);
      model::PodDemand demand = model::podDemand(bc, view, pod);
      model::NodeVerdict v = model::filterNode(bc, view, demand, bc.nodes.at(*p.node));
      if (v.verdict == model::Verdict::Fits) {
        ++fits;
      } else {
        disagreements.add("order " + pending[i] + " placed on " + *p.node + ", where the extender's filter says: " +
                          (v.reason ? v.reason->message : std::string("does not fit")));
      }
      view.hold(d, *p.node);
    }
    std::size_t over = 0;
    for (const auto& [name, node] : bc.nodes) {
      if (view.nodeUsed(name, kH200) > node.allocatable.get(kH200)) {
        ++over;
        disagreements.add("node " + name + " holds more than it has");
      }
    }
    std::printf(
        "  agreement: admitted %zu, placeable %zu, binder's node fits the extender's filter %zu/%zu, same node in "
        "the timed round %zu/%zu, nodes over capacity %zu\n",
        pending.size(), placeable, fits, pending.size(), same, pending.size(), over);
    if (pending.size() != o.orders) disagreements.add("fewer orders admitted than the tenants with budget made");
  }

  // What the controller's writer pays when its watch shows a placement: the
  // next snapshot after one GPUDevice change, beside one after a pod change.
  {
    std::vector<double> afterDevice, afterPod;
    const std::size_t changes = std::min<std::size_t>(30, pending.size());
    for (std::size_t i = 0; i < changes; ++i) {
      model::GpuDevice placed = withOrders.devices.at(pending[i]);
      placed.phase = model::DevicePhase::Bound;
      placed.node = chosen[i];
      binderWriter->upsert(placed);
      binderWriter->flush();
      afterDevice.push_back(micros(binderWriter->stats().lastPublish));
      model::Pod probe = rawPodFor(placed);
      probe.nodeName = chosen[i];
      probe.phase = model::PodPhase::Running;
      binderWriter->upsert(std::move(probe));
      binderWriter->flush();
      afterPod.push_back(micros(binderWriter->stats().lastPublish));
    }
    report("state writer: publish after one GPUDevice change", nodes, summarize(afterDevice));
    report("state writer: publish after one pod change", nodes, summarize(afterPod));
  }
  std::printf("  %s: %zu disagreement(s)\n", disagreements.count ? "FAILED" : "agreement holds", disagreements.count);
  std::fflush(stdout);
  return disagreements.count ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_controller: GPUDevice webhook over HTTPS, binder placements, agreement with the extender"};
  Options o;
  app.add_option("--nodes", o.nodeCounts, "Node counts, one run each")->capture_default_str();
  app.add_option("--orders", o.orders, "Orders from tenants with a budget (the binder's pending orders)")
      ->capture_default_str();
  app.add_option("--requests", o.requests, "HTTPS requests per node count")->capture_default_str();
  app.add_option("--iterations", o.iterations, "In-process iterations per node count")->capture_default_str();
  app.add_option("--binder-rounds", o.binderRounds, "Timed rounds of the binder loop")->capture_default_str();
  app.add_option("--server-threads", o.serverThreads, "HTTPS server threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.binderRounds = std::max<std::size_t>(1, o.binderRounds);
  o.iterations = std::max<std::size_t>(1, o.iterations);
  setLogLevel(LogLevel::kError);
  int failed = 0;
  try {
    for (std::size_t nodes : o.nodeCounts) failed |= runSize(o, nodes);
  } catch (const std::exception& e) {
    std::printf("bench_controller: %s\n", e.what());
    return 2;
  }
  return failed;
}
