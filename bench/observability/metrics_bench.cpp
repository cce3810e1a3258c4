// The cost of one metric update on the extender's hot path: a counter
// increment and a histogram observation through a handle looked up once
// (alone, and with two threads on one series), the by-label lookup that
// ExtenderMetrics::response does per request, and one scrape of a registry
// the size of the extender's.

#include <benchmark/benchmark.h>

#include <string>

#include "tally/observability/metrics.hpp"

namespace tally::observability {
namespace {

// The request-duration layout: 25 µs doubling over 18 buckets.
std::vector<double> requestBuckets() { return exponentialBuckets(0.000025, 2, 18); }

void BM_CounterInc(benchmark::State& state) {
  static Registry registry;
  static Counter& counter = registry.counter("bench_requests_total", "r", {"route"}).with({"filter"});
  for (auto _ : state) counter.inc();
}
BENCHMARK(BM_CounterInc)->Threads(1)->Threads(2);

void BM_HistogramObserve(benchmark::State& state) {
  static Registry registry;
  static Histogram& histogram =
      registry.histogram("bench_duration_seconds", "d", requestBuckets(), {"route"}).with({"filter"});
  // Values spread over the buckets, as request durations are.
  double v = 0.00001;
  for (auto _ : state) {
    histogram.observe(v);
    v = v > 5 ? 0.00001 : v * 1.7;
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2);

void BM_CounterByLabels(benchmark::State& state) {
  Registry registry;
  auto& family = registry.counter("bench_requests_total", "r", {"route", "code"});
  for (auto _ : state) family.with({"filter", std::to_string(200)}).inc();
}
BENCHMARK(BM_CounterByLabels);

void BM_Render(benchmark::State& state) {
  Registry registry;
  for (const char* route : {"filter", "prioritize", "preempt", "bind", "metrics"}) {
    registry.counter("bench_requests_total", "r", {"route", "code"}).with({route, "200"}).inc();
    registry.histogram("bench_duration_seconds", "d", requestBuckets(), {"route"}).with({route}).observe(0.001);
    registry.histogram("bench_handling_seconds", "h", requestBuckets(), {"route"}).with({route}).observe(0.001);
  }
  for (int k = 0; k < 10; ++k) registry.gauge("bench_synced", "s", {"kind"}).with({"Kind" + std::to_string(k)}).set(1);
  for (auto _ : state) benchmark::DoNotOptimize(registry.render());
}
BENCHMARK(BM_Render);

}  // namespace
}  // namespace tally::observability

BENCHMARK_MAIN();
