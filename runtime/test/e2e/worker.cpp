// Helper process for the e2e tests:
//   worker counter KUBECONFIG NS NAME N      increment an annotation N times
//   worker lease KUBECONFIG NS NAME IDENTITY campaign until SIGTERM
//   worker manager KUBECONFIG NS LEASE IDENTITY
//                                            a Manager whose leader-only controller
//                                            stamps every ConfigMap of NS with
//                                            tally.dev/reconciled-by=IDENTITY, until
//                                            SIGTERM (SignalStop)

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "tally/runtime/config.hpp"
#include "tally/runtime/conflict.hpp"
#include "tally/runtime/leader_election.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/runtime/object_meta.hpp"

using namespace tally::runtime;
using tally::jsonString;

namespace {
std::atomic<bool> stopRequested{false};
void onTerm(int) { stopRequested = true; }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) return 2;
  const std::string mode = argv[1];
  auto cfg = loadKubeconfig(argv[2]);
  if (!cfg) return 3;
  auto client = Client::create(std::move(*cfg));
  if (!client) return 4;
  const std::string ns = argv[3];
  const std::string name = argv[4];
  if (mode == "counter") {
    const int n = std::atoi(argv[5]);
    int conflicts = 0;
    for (int i = 0; i < n; ++i) {
      ConflictStats stats;
      auto r = updateWithRetry<MetaCodec>(
          **client, Resource::core("configmaps", ns), name,
          [](const MetaObject& cur) -> Result<std::optional<JsonPatch>> {
            const std::string* v = cur.metadata.annotation("tally.dev/counter");
            JsonPatch p;
            p.replace(JsonPatch::pointer({"metadata", "annotations", "tally.dev/counter"}),
                      jsonString(std::to_string((v ? std::stoi(*v) : 0) + 1)));
            return std::optional<JsonPatch>(std::move(p));
          },
          1000, &stats);
      if (!r) {
        std::fprintf(stderr, "%s\n", r.error().describe().c_str());
        return 1;
      }
      conflicts += stats.conflicts;
    }
    std::printf("conflicts=%d\n", conflicts);
    return 0;
  }
  if (mode == "manager") {
    SignalStop signals;  // before any thread starts: they inherit the blocked mask
    const std::string identity = argv[5];
    ManagerOptions mo;
    LeaderElectionConfig lc;
    lc.leaseNamespace = ns;
    lc.leaseName = name;
    lc.identity = identity;
    lc.leaseDuration = std::chrono::seconds(4);
    lc.renewDeadline = std::chrono::seconds(3);
    lc.retryPeriod = std::chrono::milliseconds(500);
    mo.leaderElection = lc;
    Manager manager(*client, mo);
    InformerOptions io;
    io.resource = Resource::core("configmaps", ns);
    auto& cms = manager.informer<MetaCodec>(io);
    std::shared_ptr<Client> api = *client;
    const Resource res = Resource::core("configmaps", ns);
    ControllerOptions co;
    co.name = "stamp";
    co.leaderOnly = true;
    auto& controller = manager.controller(co, [&](const std::string& key, std::stop_token) -> Result<ReconcileResult> {
      const std::string cmName = key.substr(key.find('/') + 1);
      auto body = api->get(res, cmName);  // the current object, never the event's copy
      if (!body) {
        if (body.error().is(ErrorCode::kNotFound)) return ReconcileResult::done();
        return std::move(body).error();
      }
      auto cur = decodeJsonObject<MetaCodec>(*body);
      if (!cur) return std::move(cur).error();
      const std::string* stamped = cur->metadata.annotation("tally.dev/reconciled-by");
      if (stamped && *stamped == identity) return ReconcileResult::done();
      std::string patch = R"({"metadata":{"resourceVersion":)" + jsonString(cur->metadata.resourceVersion) +
                          R"(,"annotations":{"tally.dev/reconciled-by":)" + jsonString(identity) + "}}}";
      auto done = api->patch(res, cmName, PatchType::kMerge, patch);
      if (!done) return std::move(done).error();  // a 409 comes back with backoff and a fresh read
      std::printf("STAMPED %s %s\n", cmName.c_str(), identity.c_str());
      std::fflush(stdout);
      return ReconcileResult::done();
    });
    controller.watch(cms);
    auto ran = manager.run(signals.token());
    if (!ran) {
      std::fprintf(stderr, "%s\n", ran.error().describe().c_str());
      return 1;
    }
    std::printf("STOPPED by signal %d\n", signals.received());
    return 0;
  }
  if (mode == "lease") {
    ::signal(SIGTERM, onTerm);
    LeaderElectionConfig lc;
    lc.leaseNamespace = ns;
    lc.leaseName = name;
    lc.identity = argv[5];
    lc.leaseDuration = std::chrono::seconds(4);
    lc.renewDeadline = std::chrono::seconds(3);
    lc.retryPeriod = std::chrono::milliseconds(500);
    lc.onStartedLeading = [&](std::stop_token) {
      std::printf("LEADING %s\n", argv[5]);
      std::fflush(stdout);
    };
    LeaderElector elector(*client, lc);
    elector.start();
    while (!stopRequested) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    elector.stop();
    return 0;
  }
  return 2;
}
