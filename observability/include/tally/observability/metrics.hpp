#pragma once
// Prometheus metrics (text exposition format 0.0.4): counters, gauges and
// histograms with labels. A value is an atomic; the hot path holds a reference
// to its series and never takes a lock. Looking a series up by label values
// takes a shared lock, so callers on a hot path look up once and keep the
// reference (series live as long as the registry).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tally::observability {

using LabelValues = std::vector<std::string>;

class Counter {
 public:
  void inc(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(const std::vector<double>& bounds);
  void observe(double v);
  // Cumulative counts per bound, then +Inf.
  std::vector<std::uint64_t> cumulative() const;
  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Exponential bucket bounds: start, start*factor, ... (count bounds).
std::vector<double> exponentialBuckets(double start, double factor, int count);

enum class MetricType { Counter, Gauge, Histogram };

// All series of one metric name, keyed by their label values.
template <class Series>
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> labelNames,
         std::function<std::unique_ptr<Series>()> make)
      : name_(std::move(name)), help_(std::move(help)), labelNames_(std::move(labelNames)), make_(std::move(make)) {}

  // The series for these label values (as many as label names), created on first use.
  Series& with(const LabelValues& values);
  Series& with(std::initializer_list<std::string_view> values) {
    return with(LabelValues(values.begin(), values.end()));
  }

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& labelNames() const { return labelNames_; }
  // f(values, series) in label order.
  template <class F>
  void forEach(F&& f) const {
    std::shared_lock lock(mu_);
    for (const auto& [values, series] : series_) f(values, *series);
  }

 private:
  std::string name_, help_;
  std::vector<std::string> labelNames_;
  std::function<std::unique_ptr<Series>()> make_;
  mutable std::shared_mutex mu_;
  std::map<LabelValues, std::unique_ptr<Series>> series_;
};

template <class Series>
Series& Family<Series>::with(const LabelValues& values) {
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(values);
    if (it != series_.end()) return *it->second;
  }
  std::unique_lock lock(mu_);
  auto& slot = series_[values];
  if (!slot) slot = make_();
  return *slot;
}

class Registry {
 public:
  Family<Counter>& counter(std::string name, std::string help, std::vector<std::string> labels = {});
  Family<Gauge>& gauge(std::string name, std::string help, std::vector<std::string> labels = {});
  Family<Histogram>& histogram(std::string name, std::string help, std::vector<double> bounds,
                               std::vector<std::string> labels = {});

  // Runs before every render, to refresh gauges computed from elsewhere
  // (snapshot age, informer staleness).
  void onScrape(std::function<void()> refresh);

  // The whole registry in text format 0.0.4, families in name order.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family<Counter>>> counters_;
  std::map<std::string, std::unique_ptr<Family<Gauge>>> gauges_;
  std::map<std::string, std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::function<void()>> refreshers_;
};

inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Escapes a label value for the text format (backslash, quote, newline).
std::string escapeLabelValue(std::string_view value);
// A sample value as Prometheus prints it (+Inf, -Inf, NaN, shortest round-trip).
std::string formatValue(double value);

}  // namespace tally::observability
