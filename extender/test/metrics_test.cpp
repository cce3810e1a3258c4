#include <gtest/gtest.h>

#include <string>

#include "tally/extender/metrics.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/model/refusal.hpp"

using namespace tally;
using namespace tally::extender;

namespace {

bool has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

}  // namespace

TEST(ExtenderMetrics, VerbResponsesCountByStatusAndRouteWhetherHeldOrLookedUp) {
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  for (int i = 0; i < 3; ++i) metrics.response("filter", 200, 0.001, 0.0005);
  metrics.response("filter", 400, 0.002, 0.001);
  metrics.response("healthz", 200, 0.0001, 0.0001);
  const std::string text = registry.render();
  EXPECT_TRUE(has(text, R"(tally_extender_requests_total{code="200",route="filter"} 3)")) << text;
  EXPECT_TRUE(has(text, R"(tally_extender_requests_total{code="400",route="filter"} 1)"));
  EXPECT_TRUE(has(text, R"(tally_extender_requests_total{code="200",route="healthz"} 1)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_duration_seconds_count{route="filter"} 4)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_handling_seconds_count{route="filter"} 4)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_duration_seconds_bucket{route="filter",le="0.0008"} 0)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_duration_seconds_bucket{route="filter",le="0.0016"} 3)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_duration_seconds_bucket{route="filter",le="+Inf"} 4)"));
  EXPECT_TRUE(has(text, R"(tally_extender_request_duration_seconds_count{route="healthz"} 1)"));
  // No prioritize request was answered: none of its series exist.
  EXPECT_EQ(text.find(R"(route="prioritize")"), std::string::npos);
}

TEST(ExtenderMetrics, RuntimeSeriesRegisteredAtStartAreExposed) {
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  metrics.apiConnectionsResumed.inc(2);
  metrics.snapshotGeneration.set(7);
  const std::string text = registry.render();
  EXPECT_TRUE(has(text, R"(tally_extender_api_connections_total{handshake="full"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(tally_extender_api_connections_total{handshake="resumed"} 2)"));
  EXPECT_TRUE(has(text, "tally_extender_snapshot_generation 7"));
  EXPECT_TRUE(has(text, "# TYPE tally_extender_snapshot_publish_duration_seconds histogram"));
  EXPECT_TRUE(has(text, "tally_extender_snapshot_publish_duration_seconds_count 0"));
}

// The count reaches the enum's last member and no further: every Code below it
// has a name of its own, the first index past it has none.
TEST(ExtenderMetrics, FilterDecisionsCountEveryRefusalCodeUnderItsOwnReason) {
  EXPECT_EQ(model::toString(static_cast<model::Code>(kCodeCount)), "Unknown")
      << "a model::Code lies past kCodeCount: count up to the enum's last member";
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  DecisionTally tally;
  for (std::size_t c = 0; c < kCodeCount; ++c) tally.add(FilterResultKind::Failed, static_cast<model::Code>(c));
  tally.add(FilterResultKind::Pass, std::nullopt);
  metrics.decisions(tally);
  const std::string text = registry.render();
  for (std::size_t c = 0; c < kCodeCount; ++c) {
    const std::string reason(model::toString(static_cast<model::Code>(c)));
    EXPECT_NE(reason, "Unknown") << "code " << c;
    EXPECT_TRUE(has(text, R"(tally_extender_filter_decisions_total{reason=")" + reason + R"(",result="failed"} 1)"))
        << reason << "\n"
        << text;
  }
  EXPECT_TRUE(has(text, R"(tally_extender_filter_decisions_total{reason="RecordDuplicate",result="failed"} 1)"));
  EXPECT_TRUE(has(text, R"(tally_extender_filter_decisions_total{reason="none",result="pass"} 1)")) << text;
  EXPECT_EQ(text.find(R"(reason="none",result="failed")"), std::string::npos) << text;
}
