// floor-extender (bench only): what the extender protocol itself costs
// kube-scheduler on this machine, without Tally's model. It speaks the same
// verbs over tally-extender's HTTP server and API client, but decides
// nothing: filter passes every candidate, prioritize lists no host (all score
// 0), bind POSTs the Binding with no assumption recorded first. It keeps no
// cache and runs no watch. The `floor` variant of run.sh puts it where the
// extender runs; the gap between its ratio and tally-extender's is what the
// model, caches and assumptions cost, the gap between its ratio and 1 what any
// extender with these verbs costs here. GET /latency lists, per verb, the
// requests answered and their seconds from header and from body, summed (the
// figures tally-extender's /metrics gives as tally_extender_request_*), so
// run.sh sets the two servers' own time side by side.

#include <CLI/CLI.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <csignal>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

#include "tally/extender/allocator.hpp"
#include "tally/extender/service.hpp"
#include "tally/extender/wire.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/config.hpp"

using namespace tally;
using namespace tally::extender;

int main(int argc, char** argv) {
  std::string kubeconfig, prefix = "/tally";
  std::uint16_t port = 8888;
  unsigned threads = 2, bindThreads = 64;
  CLI::App app{"floor-extender: the extender verbs with no decision behind them (bench/scheduler)"};
  app.add_option("--kubeconfig", kubeconfig, "Kubeconfig of the cluster the Bindings go to")->required();
  app.add_option("--port", port, "Loopback port to serve on");
  app.add_option("--url-prefix", prefix, "Path prefix of the verbs");
  app.add_option("--threads", threads, "HTTP threads");
  app.add_option("--bind-threads", bindThreads, "Threads posting Bindings");
  CLI11_PARSE(app, argc, argv);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  tuneAllocatorForLargeRequests();  // as tally-extender does

  auto config = runtime::loadKubeconfig(kubeconfig);
  if (!config) {
    std::cerr << "floor-extender: " << config.error().describe() << "\n";
    return 2;
  }
  auto client = runtime::Client::create(std::move(config).value());
  if (!client) {
    std::cerr << "floor-extender: " << client.error().describe() << "\n";
    return 2;
  }
  std::shared_ptr<runtime::Client> api = std::move(client).value();
  boost::asio::thread_pool binders(bindThreads);

  http::Router router;
  router.add("POST", prefix + "/filter", "filter", [](http::Request& req, http::Respond respond) {
    auto args = wire::parseExtenderArgs(req.body());
    if (!args.ok()) return respond(errorResponse(400, args.errors.front().message));
    wire::FilterResult result;
    result.passed = std::move(args.value.nodeNames);
    result.plainNames = args.value.plainNames;
    respond(http::Response{.body = wire::encode(result)});
  });
  router.add("POST", prefix + "/prioritize", "prioritize", [](http::Request& req, http::Respond respond) {
    auto args = wire::parseExtenderArgs(req.body());
    if (!args.ok()) return respond(errorResponse(400, args.errors.front().message));
    respond(http::Response{.body = wire::encode(std::vector<wire::HostPriority>{})});
  });
  router.add("POST", prefix + "/bind", "bind", [&](http::Request& req, http::Respond respond) {
    auto args = wire::parseBindingArgs(req.body());
    if (!args.ok()) return respond(errorResponse(400, args.errors.front().message));
    boost::asio::post(binders, [api, a = std::move(args.value), respond = std::move(respond)] {
      auto status = api->bindPod(a.podNamespace, a.podName, a.podUid, a.node);
      respond(http::Response{.body = wire::encodeError(status ? std::string() : status.error().describe())});
    });
  });

  struct Sums {
    std::uint64_t count = 0;
    double seconds = 0, handling = 0;
  };
  std::mutex sumsMutex;
  std::map<std::string, Sums, std::less<>> sums;
  router.add("GET", "/latency", "latency", [&](http::Request&, http::Respond respond) {
    std::ostringstream out;
    {
      std::lock_guard lock(sumsMutex);
      for (const auto& [route, s] : sums)
        out << route << ' ' << s.seconds << ' ' << s.count << ' ' << s.handling << '\n';
    }
    respond(http::Response{.body = out.str(), .contentType = "text/plain"});
  });
  http::Observer observer;
  observer.onResponse = [&](std::string_view route, int, double seconds, double handling) {
    std::lock_guard lock(sumsMutex);
    auto it = sums.find(route);
    if (it == sums.end()) it = sums.emplace(std::string(route), Sums{}).first;
    ++it->second.count;
    it->second.seconds += seconds;
    it->second.handling += handling;
  };

  http::ServerOptions options = serverOptions();
  options.port = port;
  options.threads = threads;
  http::Server server(options, std::move(router), std::move(observer));
  server.start();
  std::cerr << "floor-extender serving on 127.0.0.1:" << server.port() << prefix << "\n";
  int signal = 0;
  sigwait(&signals, &signal);
  server.stop();
  binders.join();
  return 0;
}
