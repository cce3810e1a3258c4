#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "tally/observability/metrics.hpp"

using namespace tally::observability;

TEST(Metrics, CounterWithLabelsRendersHelpTypeAndSeries) {
  Registry r;
  r.counter("tally_requests_total", "Requests by verb.", {"verb", "code"}).with({"filter", "200"}).inc(3);
  std::string text = r.render();
  EXPECT_NE(text.find("# HELP tally_requests_total Requests by verb.\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tally_requests_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("tally_requests_total{verb=\"filter\",code=\"200\"} 3\n"), std::string::npos);
}

TEST(Metrics, LabelValuesAreEscaped) {
  Registry r;
  r.gauge("tally_g", "g", {"reason"}).with({"a\"b\\c\nd"}).set(1.5);
  EXPECT_NE(r.render().find("tally_g{reason=\"a\\\"b\\\\c\\nd\"} 1.5\n"), std::string::npos);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  auto& h = r.histogram("tally_latency_seconds", "l", {0.001, 0.01}, {"verb"}).with({"filter"});
  h.observe(0.0005);
  h.observe(0.005);
  h.observe(1);
  std::string text = r.render();
  EXPECT_NE(text.find("tally_latency_seconds_bucket{verb=\"filter\",le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tally_latency_seconds_bucket{verb=\"filter\",le=\"0.01\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tally_latency_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("tally_latency_seconds_count{verb=\"filter\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("tally_latency_seconds_sum{verb=\"filter\"} 1.0055\n"), std::string::npos);
}

TEST(Metrics, SameNameReturnsSameFamilyAndInvalidNameThrows) {
  Registry r;
  auto& a = r.counter("tally_x_total", "x");
  auto& b = r.counter("tally_x_total", "x");
  EXPECT_EQ(&a, &b);
  EXPECT_THROW(r.counter("9bad", "x"), std::invalid_argument);
}

TEST(Metrics, ScrapeHookRefreshesGaugesBeforeRendering) {
  Registry r;
  auto& g = r.gauge("tally_age_seconds", "age").with(LabelValues{});
  r.onScrape([&] { g.set(42); });
  EXPECT_NE(r.render().find("tally_age_seconds 42\n"), std::string::npos);
}

TEST(Metrics, ConcurrentIncrementsAndScrapesLoseNothing) {
  Registry r;
  auto& fam = r.counter("tally_c_total", "c", {"t"});
  auto& hist = r.histogram("tally_h", "h", exponentialBuckets(1, 2, 4));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) {
        fam.with({std::to_string(i % 3)}).inc();
        hist.with(LabelValues{}).observe(t);
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 50; ++i) (void)r.render();
  });
  for (auto& t : threads) t.join();
  std::uint64_t total = 0;
  fam.forEach([&](const LabelValues&, const Counter& c) { total += c.value(); });
  EXPECT_EQ(total, 80000u);
  EXPECT_EQ(hist.with(LabelValues{}).count(), 80000u);
}
