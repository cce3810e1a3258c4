// Helper process for the e2e tests:
//   worker counter KUBECONFIG NS NAME N      increment an annotation N times
//   worker lease KUBECONFIG NS NAME IDENTITY campaign until SIGTERM

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "tally/runtime/config.h"
#include "tally/runtime/conflict.h"
#include "tally/runtime/leader_election.h"
#include "tally/runtime/object_meta.h"

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
            p.replace("/metadata/annotations/" + JsonPatch::pointerToken("tally.dev/counter"),
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
