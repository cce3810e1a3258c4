// The informers' own series: registered by state under one set of names
// whichever binary runs them, one series per kind the options read. The API
// server is unreachable (nothing listens on port 1), so no cache syncs.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/state/informers.hpp"
#include "tally/state/writer.hpp"
#include "unreachable_server.hpp"

namespace tally::state {
namespace {

using namespace std::chrono_literals;

bool has(const std::string& text, std::string_view line) { return text.find(line) != std::string::npos; }

TEST(InformerMetrics, EveryWatchedKindIsReportedUnderTheStateNamesNotSyncedWhileTheServerIsUnreachable) {
  setLogLevel(LogLevel::kError);  // the unreachable server's retries
  auto client = testing::unreachableClient();
  ASSERT_TRUE(client);
  SourceOptions options;
  options.billingPlans.reset();
  options.organizations = false;
  options.pollInterval = 10ms;
  Writer writer(Writer::Options{.watched = watchedKinds(options)});
  observability::Registry registry;
  Informers informers(client, writer, options, &registry);
  informers.start();
  std::this_thread::sleep_for(100ms);  // a few polls
  informers.stop();
  setLogLevel(LogLevel::kInfo);

  const std::string text = registry.render();
  for (model::Kind kind : watchedKinds(options)) {
    const std::string label = "{kind=\"" + std::string(model::toString(kind)) + "\"}";
    EXPECT_TRUE(has(text, std::string(kCacheSyncedMetric) + label + " 0")) << text;
    EXPECT_TRUE(has(text, std::string(kInformerStalenessMetric) + label + " -1")) << text;
  }
  EXPECT_TRUE(has(text, "# TYPE " + std::string(kInformerEventsMetric) + " counter"));
  EXPECT_FALSE(has(text, "kind=\"Organization\""));            // not read under these options
  EXPECT_EQ(text.find("tally_informer_"), std::string::npos);  // the runtime manager's names are not these
}

}  // namespace
}  // namespace tally::state
