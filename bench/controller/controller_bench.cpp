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
  // The bench's client plays the API server without a client certificate.
  wo.caller = http::Caller::Anyone;
  admission::addWebhook(router, std::string(controller::kGpuDeviceWebhookPath), "gpudevices",
                        controller::gpuDeviceWebhook(cell, {std::string(controller::kDefaultControllerIdentity)}), wo);
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

// The nodes a filter pass fits `pod` on, with podDemand + filterNode on every node.
std::size_t nodesFitting(const model::Cluster& cluster, const model::CapacityView& view, const model::Pod& pod) {
  model::PodDemand demand = model::podDemand(cluster, view, pod);
  std::size_t fits = 0;
  for (const auto& [name, node] : cluster.nodes) {
    fits += model::filterNode(cluster, view, demand, node).verdict == model::Verdict::Fits;
  }
  return fits;
}

// One node count's run: the orders, their reviews, the webhook's answers on
// the snapshot it serves, and what disagreed.
struct SizeRun {
  const Options& o;
  std::size_t nodes;
  model::Cluster base;
  std::vector<Order> orders;
  std::vector<std::string> reviews;
  std::vector<admission::AdmissionRequest> requests;
  std::vector<bool> admitted;
  Disagreements disagreements;
};

// Every order reviewed in-process: admitted exactly when its tenant has a budget.
bool reviewOrders(SizeRun& run, const state::Snapshot& snap) {
  for (std::size_t i = 0; i < run.orders.size(); ++i) {
    run.reviews.push_back(createReview(run.orders[i].device, i));
    auto decoded = admission::decodeAdmissionReview(run.reviews.back());
    if (!decoded) {
      std::printf("  review %zu does not decode: %s\n", i, decoded.error().describe().c_str());
      return false;
    }
    run.requests.push_back(std::move(decoded).value());
  }
  std::size_t admitted = 0, refused = 0, overBudget = 0;
  for (std::size_t i = 0; i < run.orders.size(); ++i) {
    const Order& order = run.orders[i];
    admission::AdmissionResponse r = controller::reviewGpuDevice(snap, run.requests[i], {}).response;
    run.admitted.push_back(r.allowed);
    if (r.allowed) {
      ++admitted;
    } else {
      ++refused;
      if (r.message.find("[BudgetExceeded]") != std::string::npos) ++overBudget;
    }
    if (r.allowed != order.withinBudget) {
      run.disagreements.add("order " + order.device.name + (r.allowed ? " admitted" : " refused: " + r.message) +
                            (order.withinBudget ? ", its tenant has budget" : ", its tenant has none"));
    }
  }
  const std::size_t expectedRefused = run.orders.size() - run.o.orders;
  std::printf(
      "  agreement: reviewed %zu: admitted %zu (expected %zu), refused %zu (BudgetExceeded %zu, expected %zu)\n",
      run.orders.size(), admitted, run.o.orders, refused, overBudget, expectedRefused);
  if (overBudget != expectedRefused) run.disagreements.add("refusals other than the exhausted budget's");
  return true;
}

// The webhook's route and decision beside the extender's filter for a raw pod
// asking the same units (filterNode on every node, and the FitTable query the
// extender ships), on one snapshot, over the same orders in turn.
void sideBySide(SizeRun& run, const state::Snapshot& snap) {
  const model::Cluster& cluster = snap.cluster();
  admission::WebhookOptions wo;
  observability::Registry registry;
  wo.metrics = std::make_shared<admission::WebhookMetrics>(registry);
  const admission::Validator handler{
      [&](const admission::AdmissionRequest& r) { return controller::reviewGpuDevice(snap, r, {}); }};
  std::vector<std::string_view> names;
  for (const auto& [name, node] : cluster.nodes) names.push_back(name);
  std::vector<std::uint32_t> rows;
  snap.fit.findAll(names, rows);
  std::vector<model::FitTable::Query::Answer> answers;
  std::vector<model::Pod> pods;
  for (const auto& order : run.orders) pods.push_back(rawPodFor(order.device));

  std::vector<double> route, decide, filterPass, fitPass;
  std::size_t fitsSeen = 0;
  for (std::size_t i = 0; i < run.o.iterations + 20; ++i) {
    const std::size_t k = i % run.orders.size();
    auto t0 = Clock::now();
    http::Response answered = admission::answerReview("gpudevices", handler, run.reviews[k], wo);
    auto t1 = Clock::now();
    admission::AdmissionResponse r = controller::reviewGpuDevice(snap, run.requests[k], {}).response;
    auto t2 = Clock::now();
    const std::size_t fits = nodesFitting(cluster, snap.usage, pods[k]);
    auto t3 = Clock::now();
    model::PodDemand demand = model::podDemand(cluster, snap.usage, pods[k]);
    auto query = snap.fit.query(cluster, snap.usage, demand);
    query.filterAll(rows, answers);
    auto t4 = Clock::now();
    std::size_t fitsInTable = 0;
    for (const auto& a : answers) fitsInTable += a.verdict && a.verdict->verdict == model::Verdict::Fits;
    if (answered.status != 200 || r.allowed != run.admitted[k] || fits != fitsInTable) {
      run.disagreements.add("order " + run.orders[k].device.name + ": route " + std::to_string(answered.status) +
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
  std::printf("  in-process, same snapshot, same %zu orders in turn (%zu iterations):\n", run.orders.size(),
              run.o.iterations);
  report("webhook route: decode + reviewGpuDevice + encode", run.nodes, summarize(route));
  report("webhook decision: reviewGpuDevice", run.nodes, summarize(decide));
  report("extender filter: podDemand + filterNode x all nodes", run.nodes, summarize(filterPass));
  report("extender filter as shipped: podDemand + FitTable", run.nodes, summarize(fitPass));
  std::printf("  ratio filter pass / webhook decision (p50): filterNode %.2f, FitTable %.2f\n",
              summarize(filterPass).p50 / summarize(decide).p50, summarize(fitPass).p50 / summarize(decide).p50);
  if (fitsSeen == 0) run.disagreements.add("the raw pods fit nowhere: the comparison is empty");
}

// A refused order's raw pod, asking the same units, gets no node either.
void checkRefused(SizeRun& run, const state::Snapshot& snap) {
  std::size_t refused = 0, noNode = 0;
  for (std::size_t i = 0; i < run.orders.size(); ++i) {
    if (run.admitted[i]) continue;
    ++refused;
    const std::size_t fits = nodesFitting(snap.cluster(), snap.usage, rawPodFor(run.orders[i].device));
    if (fits == 0) {
      ++noNode;
    } else {
      run.disagreements.add("order " + run.orders[i].device.name + " refused, but its raw pod fits " +
                            std::to_string(fits) + " node(s)");
    }
  }
  std::printf("  agreement: refused %zu, the extender's filter leaves the raw pod no node %zu/%zu\n", refused, noNode,
              refused);
}

// The binder's decision loop over `pending` (keys of Pending devices in
// `snap`, in creation order), timed over rounds; the nodes of the first round.
std::vector<std::string> timeBinder(const SizeRun& run, const state::Snapshot& snap,
                                    const std::vector<std::string>& pending) {
  const model::Cluster& cluster = snap.cluster();
  std::vector<std::string> chosen(pending.size());
  std::vector<double> rates, perPlacement;
  for (std::size_t round = 0; round < run.o.binderRounds; ++round) {
    model::HeldAheadView view(cluster, snap.usage);
    std::size_t placed = 0;
    auto started = Clock::now();
    for (std::size_t i = 0; i < pending.size(); ++i) {
      const model::GpuDevice& d = cluster.devices.at(pending[i]);
      auto t0 = Clock::now();
      model::Placement p = model::placeHeldDevice(cluster, view, d);
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
  report("binder: placeHeldDevice + hold, per order", run.nodes, summarize(perPlacement));
  std::sort(rates.begin(), rates.end());
  std::printf("  %-52s nodes=%-5zu %.0f placements/s (median of %zu rounds of %zu orders)\n", "binder decision loop",
              run.nodes, rates[rates.size() / 2], rates.size(), pending.size());
  return chosen;
}

// The binder's loop again, each placement checked before its hold: a node is
// found, the one of the timed round, and the extender's filter fits the raw
// pod asking the same units there; no node ends above its units.
void checkBinder(SizeRun& run, const state::Snapshot& snap, const std::vector<std::string>& pending,
                 const std::vector<std::string>& chosen) {
  const model::Cluster& cluster = snap.cluster();
  model::HeldAheadView view(cluster, snap.usage);
  std::size_t placeable = 0, fits = 0, same = 0;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const model::GpuDevice& d = cluster.devices.at(pending[i]);
    model::Placement p = model::placeHeldDevice(cluster, view, d);
    if (!p.node) {
      run.disagreements.add("admitted order " + pending[i] + " is not placeable: " + p.decision.summary());
      continue;
    }
    ++placeable;
    if (*p.node == chosen[i]) {
      ++same;
    } else {
      run.disagreements.add("order " + pending[i] + " placed on " + *p.node + ", on " + chosen[i] + " the first time");
    }
    const model::Pod pod = rawPodFor(d);  // the demand points at it
    model::PodDemand demand = model::podDemand(cluster, view, pod);
    model::NodeVerdict v = model::filterNode(cluster, view, demand, cluster.nodes.at(*p.node));
    if (v.verdict == model::Verdict::Fits) {
      ++fits;
    } else {
      run.disagreements.add("order " + pending[i] + " placed on " + *p.node + ", where the extender's filter says: " +
                            (v.reason ? v.reason->message : std::string("does not fit")));
    }
    view.hold(d, *p.node);
  }
  std::size_t over = 0;
  for (const auto& [name, node] : cluster.nodes) {
    if (view.nodeUsed(name, kH200) > node.allocatable.get(kH200)) {
      ++over;
      run.disagreements.add("node " + name + " holds more than it has");
    }
  }
  std::printf(
      "  agreement: admitted %zu, placeable %zu, binder's node fits the extender's filter %zu/%zu, same node in "
      "the timed round %zu/%zu, nodes over capacity %zu\n",
      pending.size(), placeable, fits, pending.size(), same, pending.size(), over);
  if (pending.size() != run.o.orders) run.disagreements.add("fewer orders admitted than the tenants with budget made");
}

// What the controller's writer pays when its watch shows a placement: the
// next snapshot after one GPUDevice change, beside one after a pod change.
void timePublication(const SizeRun& run, state::Writer& writer, const model::Cluster& withOrders,
                     const std::vector<std::string>& pending, const std::vector<std::string>& chosen) {
  std::vector<double> afterDevice, afterPod;
  const std::size_t changes = std::min<std::size_t>(30, pending.size());
  for (std::size_t i = 0; i < changes; ++i) {
    model::GpuDevice placed = withOrders.devices.at(pending[i]);
    placed.phase = model::DevicePhase::Bound;
    placed.node = chosen[i];
    writer.upsert(placed);
    writer.flush();
    afterDevice.push_back(micros(writer.stats().lastPublish));
    model::Pod probe = rawPodFor(placed);
    probe.nodeName = chosen[i];
    probe.phase = model::PodPhase::Running;
    writer.upsert(std::move(probe));
    writer.flush();
    afterPod.push_back(micros(writer.stats().lastPublish));
  }
  report("state writer: publish after one GPUDevice change", run.nodes, summarize(afterDevice));
  report("state writer: publish after one pod change", run.nodes, summarize(afterPod));
}

int runSize(const Options& o, std::size_t nodes) {
  std::printf("== %zu nodes (8 H200 each, vm-passthrough), %zu orders to place\n", nodes, o.orders);
  SizeRun run{o, nodes, benchCluster(nodes), benchOrders(o.orders), {}, {}, {}, {}};
  auto writer = loaded(run.base);
  {
    auto snap = writer->snapshots().read();
    std::int64_t used = 0;
    for (const auto& [name, node] : snap->cluster().nodes) used += snap->usage.nodeUsed(name, kH200);
    std::printf("  cluster: %zu GPUDevices held, %zu pods, %zu VMIs, %zu namespaces; %lld of %zu units in use\n",
                run.base.devices.size(), run.base.pods.size(), run.base.vmis.size(), run.base.namespaces.size(),
                static_cast<long long>(used), nodes * kUnitsPerNode);
    if (!reviewOrders(run, *snap)) return 1;
    sideBySide(run, *snap);
    checkRefused(run, *snap);
  }
  measureHttps(o, nodes, writer->snapshots(), run.reviews, run.admitted, run.disagreements);

  // The binder decides on the admitted orders, Pending in its snapshot.
  model::Cluster withOrders = run.base;
  std::vector<std::string> pending;
  for (std::size_t i = 0; i < run.orders.size(); ++i) {
    if (!run.admitted[i]) continue;
    const model::GpuDevice& d = run.orders[i].device;
    pending.push_back(model::objectKey(d.ns, d.name));
    withOrders.devices[pending.back()] = d;
  }
  auto binderWriter = loaded(withOrders);
  std::vector<std::string> chosen;
  {
    auto snap = binderWriter->snapshots().read();
    chosen = timeBinder(run, *snap, pending);
    checkBinder(run, *snap, pending, chosen);
  }
  timePublication(run, *binderWriter, withOrders, pending, chosen);

  const std::size_t count = run.disagreements.count;
  std::printf("  %s: %zu disagreement(s)\n", count ? "FAILED" : "agreement holds", count);
  std::fflush(stdout);
  return count ? 1 : 0;
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
