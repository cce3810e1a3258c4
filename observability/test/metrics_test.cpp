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
  // prometheus-cpp writes a series' labels in name order.
  EXPECT_NE(text.find("tally_requests_total{code=\"200\",verb=\"filter\"} 3\n"), std::string::npos) << text;
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

TEST(Metrics, ExpositionListsFamiliesByNameWithSeriesInLabelOrderAndHistogramTotals) {
  Registry r;
  auto& requests = r.counter("tally_requests_total", "Responses by route and code.", {"route", "code"});
  requests.with({"prioritize", "200"}).inc(2);
  requests.with({"filter", "500"}).inc();
  requests.with({"filter", "200"}).inc(5);
  r.gauge("tally_cache_synced", "1 when synced.", {"kind"}).with({"Node"}).set(1);
  auto& latency = r.histogram("tally_latency_seconds", "Latency.", {0.25, 0.5, 1}, {"route"}).with({"bind"});
  for (double v : {0.125, 0.25, 0.75, 2.0}) latency.observe(v);
  r.counter("tally_unused_total", "No series yet.");

  EXPECT_EQ(r.render(),
            "# HELP tally_cache_synced 1 when synced.\n"
            "# TYPE tally_cache_synced gauge\n"
            "tally_cache_synced{kind=\"Node\"} 1\n"
            "# HELP tally_latency_seconds Latency.\n"
            "# TYPE tally_latency_seconds histogram\n"
            "tally_latency_seconds_count{route=\"bind\"} 4\n"
            "tally_latency_seconds_sum{route=\"bind\"} 3.125\n"
            "tally_latency_seconds_bucket{route=\"bind\",le=\"0.25\"} 2\n"
            "tally_latency_seconds_bucket{route=\"bind\",le=\"0.5\"} 2\n"
            "tally_latency_seconds_bucket{route=\"bind\",le=\"1\"} 3\n"
            "tally_latency_seconds_bucket{route=\"bind\",le=\"+Inf\"} 4\n"
            "# HELP tally_requests_total Responses by route and code.\n"
            "# TYPE tally_requests_total counter\n"
            "tally_requests_total{code=\"200\",route=\"filter\"} 5\n"
            "tally_requests_total{code=\"200\",route=\"prioritize\"} 2\n"
            "tally_requests_total{code=\"500\",route=\"filter\"} 1\n");
}

TEST(Metrics, HistogramHandleReportsBucketsSumAndCount) {
  Registry r;
  auto& h = r.histogram("tally_h_seconds", "h", {1, 0.5}).with(LabelValues{});
  for (double v : {0.5, 0.75, 3.0}) h.observe(v);
  EXPECT_EQ(h.bounds(), (std::vector<double>{0.5, 1}));
  EXPECT_EQ(h.cumulative(), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(h.count(), 3u);
  EXPECT_DOUBLE_EQ(h.sum(), 4.25);
}

TEST(Metrics, HelpBackslashAndNewlineAreEscaped) {
  Registry r;
  r.counter("tally_x_total", "a\\b\nc").with(LabelValues{}).inc();
  EXPECT_NE(r.render().find("# HELP tally_x_total a\\\\b\\nc\n"), std::string::npos) << r.render();
}

TEST(Metrics, WrongNumberOfLabelValuesOrBadLabelNameThrows) {
  Registry r;
  auto& fam = r.counter("tally_y_total", "y", {"a", "b"});
  EXPECT_THROW(fam.with({"only-one"}), std::invalid_argument);
  EXPECT_THROW(r.counter("tally_z_total", "z", {"bad-name"}), std::invalid_argument);
  EXPECT_THROW(r.gauge("tally_y_total", "a counter's name"), std::invalid_argument);
}

TEST(Metrics, ThreadsIncrementingOneHeldHandleLoseNoIncrement) {
  Registry r;
  Counter& counter = r.counter("tally_shared_total", "s", {"route"}).with({"filter"});
  Histogram& histogram = r.histogram("tally_shared_seconds", "s", {1, 2}).with(LabelValues{});
  constexpr int kThreads = 4, kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        counter.inc();
        histogram.observe(1.5);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter.value(), std::uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(histogram.cumulative(), (std::vector<std::uint64_t>{0, kThreads * kPerThread, kThreads * kPerThread}));
  EXPECT_NE(r.render().find("tally_shared_total{route=\"filter\"} 200000\n"), std::string::npos);
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
