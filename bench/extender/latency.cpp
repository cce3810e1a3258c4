// extender-latency: filter and prioritize latency of tally-extender at a given
// number of candidate nodes, in-process (parse + decide + encode, what the
// server spends) and over HTTP on loopback (one keep-alive connection, what
// the scheduler sees); the HTTP part can target another extender (--url), e.g.
// the Go peer. Also measures the cost of publishing a snapshot (--publish).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <random>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/extender/allocator.hpp"
#include "tally/extender/service.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/common/log.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;
using namespace tally::model::testing;
using Clock = std::chrono::steady_clock;

namespace {

struct Percentiles {
  double p50 = 0, p99 = 0, mean = 0;
};

Percentiles summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Percentiles p;
  if (us.empty()) return p;
  p.p50 = us[us.size() / 2];
  p.p99 = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  double sum = 0;
  for (double v : us) sum += v;
  p.mean = sum / static_cast<double>(us.size());
  return p;
}

void report(const std::string& what, std::size_t nodes, const Percentiles& p) {
  std::printf("%-34s nodes=%-6zu p50=%9.1f us  p99=%9.1f us  mean=%9.1f us\n", what.c_str(), nodes, p.p50, p.p99,
              p.mean);
  std::fflush(stdout);
}

// The bench cluster: passthrough nodes with 8 devices, 4 pods per node; every
// 10th node serves another mode (unresolvable) and every 7th is full.
std::vector<state::Object> benchCluster(std::size_t nodes) {
  auto objects = syntheticCluster(nodes, nodes * 4, 20);
  for (std::size_t i = 0; i < nodes; ++i) {
    std::string name = "node-" + std::to_string(i);
    if (i % 10 == 0)
      objects.emplace_back(gpuNode(name, model::NodeMode::PodHami, kH200, 8));
    else if (i % 7 == 0)
      objects.emplace_back(gpuPod("tenant-0", "filler-" + name, kH200, 4, name));
  }
  return objects;
}

std::vector<std::string> nodeNames(std::size_t nodes) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < nodes; ++i) names.push_back("node-" + std::to_string(i));
  return names;
}

// The Go peer's view of the same cluster: per node its mode, devices and use.
void writePeerCluster(const std::string& path, const ExtenderSnapshot& snap) {
  std::ofstream out(path);
  out << "{\"nodes\":[";
  bool first = true;
  for (const auto& [name, node] : snap.cluster().nodes) {
    out << (first ? "" : ",") << "{\"name\":\"" << name << "\",\"mode\":\"" << model::toString(node.expectedMode)
        << "\",\"resource\":\"" << kH200 << "\",\"allocatable\":" << node.allocatable.get(kH200)
        << ",\"used\":" << snap.usage.nodeUsed(name, kH200) << "}";
    first = false;
  }
  out << "],\"mode\":\"vm-passthrough\"}\n";
}

// A request body as tally-extender's HTTP server hands it over: with room for
// simdjson's padding reserved when it was read (else parsing first copies it).
std::string withPadding(const std::string& body) {
  std::string copy;
  copy.reserve(body.size() + 64);
  copy.assign(body);
  return copy;
}

class Client {
 public:
  Client(const std::string& host, std::uint16_t port) : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address(host), port});
    socket_.set_option(boost::asio::ip::tcp::no_delay(true));
    buffer_.reserve(1 << 20);  // read responses in large chunks, as Go's HTTP client does
  }
  int post(const std::string& target, const std::string& body, std::string& response) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket_, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 30);
    http::read(socket_, buffer_, parser);
    response = std::move(parser.get().body());
    return static_cast<int>(parser.get().result_int());
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

void measureHttp(const std::string& label, const std::string& host, std::uint16_t port, const std::string& prefix,
                 std::size_t nodes, const std::string& filterBody, int iterations) {
  Client client(host, port);
  std::string response;
  for (const char* verb : {"filter", "prioritize"}) {
    std::vector<double> us;
    for (int i = 0; i < iterations + 20; ++i) {
      auto t0 = Clock::now();
      int status = client.post(prefix + "/" + verb, filterBody, response);
      auto t1 = Clock::now();
      if (status != 200) {
        std::cerr << verb << ": HTTP " << status << ": " << response.substr(0, 200) << "\n";
        return;
      }
      if (i >= 20) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    report(label + " " + verb, nodes, summarize(us));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"extender-latency: filter/prioritize latency in-process and over HTTP, snapshot publish cost"};
  std::vector<std::size_t> nodeCounts = {500, 5000};
  int iterations = 2000;
  std::string url;
  std::string peerCluster;
  bool publish = false;
  bool inProcessOnly = false;
  bool phases = false;
  bool shuffled = false;
  std::vector<std::string> verbs = {"filter", "prioritize"};
  std::size_t publishNodes = 10000, publishPods = 150000;
  app.add_option("--nodes", nodeCounts, "Candidate node counts")->capture_default_str();
  app.add_option("--iterations", iterations, "Requests per measurement")->capture_default_str();
  app.add_option("--url", url,
                 "Measure another extender over HTTP instead, e.g. http://127.0.0.1:8890 (verbs at /filter)");
  app.add_option("--write-peer-cluster", peerCluster,
                 "Write the cluster the Go peer serves to this file (with --nodes N) and exit");
  app.add_flag("--publish", publish, "Measure snapshot publication instead");
  app.add_flag("--in-process-only", inProcessOnly, "Skip the HTTP measurements (for profiling)");
  app.add_flag("--shuffled", shuffled, "In-process requests list the nodes in a different random order each time");
  app.add_flag("--phases", phases, "Also time filter's parsing and answering apart (one pass and lists-then-encode)");
  app.add_option("--verbs", verbs, "Verbs to measure in-process")->capture_default_str();
  std::size_t window = 0;
  bool cold = false;
  app.add_option("--window", window,
                 "In-process requests list this many of the nodes as kube-scheduler does: in the API server's "
                 "order from a start that moves on by as many each request, two workers' chunks of 70 interleaved");
  double dropped = 0;
  app.add_option("--dropped", dropped,
                 "With --window: the share of the nodes kube-scheduler's own filters drop from every list (full, "
                 "tainted), the same nodes each time, so its runs have gaps")
      ->check(CLI::Range(0.0, 0.9));
  app.add_flag("--cold", cold,
               "Evict the caches before every in-process request (64 MiB written), as the other processes on "
               "a busy machine do between two of kube-scheduler's calls");
  app.add_option("--publish-nodes", publishNodes, "Nodes for --publish")->capture_default_str();
  app.add_option("--publish-pods", publishPods, "Pods for --publish")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  tuneAllocatorForLargeRequests();  // as tally-extender's main does
  setLogLevel(LogLevel::kError);

  if (publish) {
    auto t0 = Clock::now();
    auto writer = loadedWriter(syntheticCluster(publishNodes, publishPods, 50));
    auto t1 = Clock::now();
    std::printf("initial load of %zu nodes / %zu pods: %.0f ms\n", publishNodes, publishPods,
                std::chrono::duration<double, std::milli>(t1 - t0).count());
    std::vector<double> us, apply;
    for (int i = 0; i < 30; ++i) {
      // A batch as a watch delivers it: a few pods changing on a few nodes.
      for (int k = 0; k < 10; ++k) {
        std::size_t n = static_cast<std::size_t>(i * 10 + k);
        writer->upsert(gpuPod("tenant-1", "new-" + std::to_string(n), kH200, 1,
                              "node-" + std::to_string((n * 37) % publishNodes)));
      }
      writer->flush();
      us.push_back(std::chrono::duration<double, std::micro>(writer->stats().lastPublish).count());
      apply.push_back(std::chrono::duration<double, std::micro>(writer->stats().lastApply).count());
    }
    report("publish (10 pod events per batch)", publishNodes, summarize(us));
    report("apply 10 events to the index", publishNodes, summarize(apply));
    std::printf("rows rebuilt in the last publish: %zu, FitTable blocks shared: %zu, cluster copied: %s\n",
                writer->stats().lastRowsRebuilt, writer->stats().lastFitBlocksShared,
                writer->stats().lastCopiedCluster ? "yes" : "no");
    // The baseline: a publish that shares nothing, as every publish did before
    // snapshots shared storage; a node change forces it (cluster copy, FitTable build).
    std::vector<double> full;
    for (int i = 0; i < 10; ++i) {
      model::Node node = writer->snapshots().read()->cluster().nodes.at("node-" + std::to_string(i));
      node.unschedulable = !node.unschedulable;
      writer->upsert(node);
      writer->flush();
      full.push_back(std::chrono::duration<double, std::micro>(writer->stats().lastPublish).count());
    }
    report("publish after a node change (full)", publishNodes, summarize(full));
    std::printf("ratio full / after pod events (p50): %.1f\n", summarize(full).p50 / summarize(us).p50);
    return 0;
  }

  for (std::size_t nodes : nodeCounts) {
    auto writer = loadedWriter(benchCluster(nodes));
    std::string pod = podJson("tenant-3", "bench-pod", "bench-uid", 1);
    std::string body = extenderArgs(pod, nodeNames(nodes));
    // With --shuffled, every request lists the nodes in another order (16
    // bodies in turn): the name lookup's remembered order never holds, as for
    // a client that does not list nodes the way kube-scheduler does.
    std::vector<std::string> shuffledBodies;
    if (shuffled) {
      std::mt19937_64 rng(nodes);
      for (int k = 0; k < 16; ++k) {
        auto names = nodeNames(nodes);
        std::shuffle(names.begin(), names.end(), rng);
        shuffledBodies.push_back(extenderArgs(pod, names));
      }
    }
    // With --window, the candidates of kube-scheduler's requests: its node
    // list (the API server's order, by name) from a start that moves on by
    // the nodes each request covered, two workers' chunks interleaved.
    std::vector<std::string> windowBodies;
    if (window > 0) {
      auto names = nodeNames(nodes);
      std::sort(names.begin(), names.end());
      constexpr std::size_t kChunk = 70;
      std::mt19937_64 rng(window);
      std::vector<bool> drop(names.size(), false);
      for (std::size_t row = 0; row < names.size(); ++row) {
        drop[row] = static_cast<double>(rng() % 1'000'000) < dropped * 1e6;
      }
      for (std::size_t start = 0, k = 0; k < 64; ++k, start = (start + window) % names.size()) {
        std::vector<std::string> list;
        std::array<std::size_t, 2> at{0, kChunk}, end{kChunk, 2 * kChunk};
        std::size_t nextChunk = 2;
        while (list.size() < std::min(window, names.size()) && nextChunk * kChunk < 2 * names.size()) {
          const std::size_t w = rng() % 2;
          if (at[w] == end[w]) {
            at[w] = nextChunk * kChunk;
            end[w] = at[w] + kChunk;
            ++nextChunk;
          }
          const std::size_t row = (start + at[w]++) % names.size();
          if (!drop[row]) list.push_back(names[row]);
        }
        windowBodies.push_back(extenderArgs(pod, list));
      }
    }
    auto bodyFor = [&](int i) -> const std::string& {
      if (!windowBodies.empty()) return windowBodies[static_cast<std::size_t>(i) % windowBodies.size()];
      return shuffled ? shuffledBodies[static_cast<std::size_t>(i) % shuffledBodies.size()] : body;
    };
    std::vector<char> evict(cold ? std::size_t{64} << 20 : 0);
    auto evictCaches = [&] {
      for (std::size_t k = 0; k < evict.size(); k += 64) evict[k] = static_cast<char>(evict[k] + 1);
    };
    if (!peerCluster.empty()) {
      writePeerCluster(peerCluster, *writer->snapshots().read());
      std::ofstream(peerCluster + ".body") << body;
      return 0;
    }
    if (!url.empty()) {
      std::string rest = url.substr(url.find("://") + 3);
      std::string hostPort = rest.substr(0, rest.find('/'));
      std::string prefix = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/'));
      std::string host = hostPort.substr(0, hostPort.find(':'));
      auto port = static_cast<std::uint16_t>(std::stoi(hostPort.substr(hostPort.find(':') + 1)));
      measureHttp("http " + url, host, port, prefix, nodes, body, iterations);
      continue;
    }
    observability::Registry registry;
    ExtenderMetrics metrics(registry);
    ExtenderService service(writer->snapshots(), metrics, ServiceOptions{}, nullptr);
    for (const std::string& verb : verbs) {
      std::vector<double> us;
      for (int i = 0; i < iterations + 20; ++i) {
        std::string copy = withPadding(bodyFor(i));
        evictCaches();
        auto t0 = Clock::now();
        http::Response r = verb == "filter" ? service.filter(copy) : service.prioritize(copy);
        auto t1 = Clock::now();
        if (r.status != 200) {
          std::cerr << verb << ": " << r.status << " " << r.body.substr(0, 200) << "\n";
          return 1;
        }
        if (i >= 20) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::string what = std::string("in-process ") + verb + (shuffled ? " (shuffled)" : "");
      if (window > 0) what += " (window " + std::to_string(window) + ")";
      if (window > 0 && dropped > 0) what += " (" + std::to_string(static_cast<int>(dropped * 100)) + "% dropped)";
      if (cold) what += " (cold)";
      report(what, nodes, summarize(us));
    }
    if (phases) {
      // Where filter's time goes: parsing the request, then the answer written
      // in one pass (what the service does) or as lists encoded afterwards.
      std::vector<double> parse, answer, lists;
      auto snap = writer->snapshots().read();
      for (int i = 0; i < iterations + 20; ++i) {
        std::string copy = withPadding(body);
        auto t0 = Clock::now();
        auto args = wire::parseExtenderArgs(copy);
        auto t1 = Clock::now();
        DecisionTally tally;
        std::string onePass = filterResponse(*snap, args.value, &tally);
        auto t2 = Clock::now();
        std::string listed = wire::encode(filterNodes(*snap, args.value, &tally));
        auto t3 = Clock::now();
        if (i < 20) continue;
        parse.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        answer.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
        lists.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
      }
      report("  filter: parse the request", nodes, summarize(parse));
      report("  filter: answer in one pass", nodes, summarize(answer));
      report("  filter: answer as lists, encoded", nodes, summarize(lists));
    }
    if (inProcessOnly) continue;
    http::Router router;
    service.addVerbRoutes(router);
    http::ServerOptions ho = serverOptions();
    ho.threads = 2;
    http::Server server(ho, std::move(router), service.observer());
    server.start();
    measureHttp("http tally-extender", "127.0.0.1", server.port(), "/tally", nodes, body, iterations);
    server.stop();
  }
  return 0;
}
