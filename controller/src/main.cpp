// tally-controller: Tally's admission webhooks and, on the Lease holder, its
// leader-only controllers. Every replica runs the informers and the state
// writer and answers the webhooks from its own snapshot; the leader keeps the
// serving certificate and runs the device binder, the quota controller, the
// pool auditor and the usage recorder (replica.hpp has the order).

#include <chrono>
#include <optional>
#include <CLI/CLI.hpp>
#include <iostream>

#include "flags.hpp"
#include "replica.hpp"
#include "tally/common/log.hpp"

int main(int argc, char** argv) {
  using namespace tally;
  CLI::App app{"tally-controller: Tally's admission webhooks (GPUDevice orders) and its leader-only controllers"};
  controller::Flags f;
  controller::addFlags(app, f);
  CLI11_PARSE(app, argc, argv);

  if (auto logging = runtime::process::setUpLogging(f.process.logLevel, f.process.logFormat); !logging) {
    std::cerr << logging.error().message << "\n";
    return 2;
  }
  if (const std::string why = controller::contradiction(f); !why.empty()) {
    std::cerr << "tally-controller: " << why << "\n";
    return 2;
  }
  // Before any thread starts: they all inherit SIGTERM and SIGINT blocked.
  runtime::SignalStop signals;
  try {
    auto connected = runtime::process::connect(runtime::process::clientFlags(f.process, "tally-controller/0.1"));
    if (!connected) {
      logError("cannot reach Kubernetes", {{"error", connected.error().describe()}});
      return 2;
    }
    observability::Registry registry;
    std::optional<controller::Replica> replica;
    replica.emplace(f, registry, std::move(connected).value());
    const runtime::Status ran = replica->run(signals.token());
    const auto stopping = std::chrono::steady_clock::now();
    logInfo("shutting down", {{"signal", signals.received()}});
    replica.reset();  // its threads, pools and connections
    logInfo("stopped", {{"ms", static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                             std::chrono::steady_clock::now() - stopping)
                                                             .count())}});
    if (!ran) {
      logError("controller manager stopped", {{"error", ran.error().describe()}});
      return 1;
    }
  } catch (const std::exception& e) {
    logError("tally-controller failed", {{"error", e.what()}});
    return 1;
  }
  return 0;
}
