#pragma once
// Prometheus metrics (text exposition format 0.0.4) on prometheus-cpp's core
// registry: counters, gauges and histograms with labels, rendered by its text
// serializer. A series is a handle to a prometheus-cpp metric: looking one up
// by label values takes a shared lock, so callers on a hot path look up once
// and keep the reference (series live as long as the registry). Counter and
// gauge updates are atomic (lock-free); a histogram observation takes that
// series' own mutex inside prometheus-cpp (so a scrape reads its buckets, sum
// and count consistently), never the registry's or a family's.

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
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
  explicit Counter(prometheus::Counter& series) : series_(&series) {}
  void inc(std::uint64_t n = 1) { series_->Increment(static_cast<double>(n)); }
  std::uint64_t value() const { return static_cast<std::uint64_t>(series_->Value()); }

 private:
  prometheus::Counter* series_;
};

class Gauge {
 public:
  explicit Gauge(prometheus::Gauge& series) : series_(&series) {}
  void set(double v) { series_->Set(v); }
  void add(double v) { series_->Increment(v); }
  double value() const { return series_->Value(); }

 private:
  prometheus::Gauge* series_;
};

class Histogram {
 public:
  Histogram(prometheus::Histogram& series, std::vector<double> bounds) : series_(&series), bounds_(std::move(bounds)) {}
  void observe(double v) { series_->Observe(v); }
  // Cumulative counts per bound, then +Inf.
  std::vector<std::uint64_t> cumulative() const;
  std::uint64_t count() const;
  double sum() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  prometheus::Histogram* series_;
  std::vector<double> bounds_;  // ascending
};

// Exponential bucket bounds: start, start*factor, ... (count bounds).
std::vector<double> exponentialBuckets(double start, double factor, int count);

// All series of one metric name, keyed by their label values.
template <class Series>
class Family {
 public:
  // Creates the prometheus-cpp metric for a label set and wraps it.
  using Make = std::function<std::unique_ptr<Series>(const prometheus::Labels&)>;

  Family(std::string name, std::vector<std::string> labelNames, Make make)
      : name_(std::move(name)), labelNames_(std::move(labelNames)), make_(std::move(make)) {}

  // The series for these label values (exactly as many as label names),
  // created on first use.
  Series& with(const LabelValues& values);
  Series& with(std::initializer_list<std::string_view> values) {
    return with(LabelValues(values.begin(), values.end()));
  }

  const std::string& name() const { return name_; }
  const std::vector<std::string>& labelNames() const { return labelNames_; }
  // f(values, series) in label-value order.
  template <class F>
  void forEach(F&& f) const {
    std::shared_lock lock(mu_);
    for (const auto& [values, series] : series_) f(values, *series);
  }

 private:
  std::string name_;
  std::vector<std::string> labelNames_;
  Make make_;
  mutable std::shared_mutex mu_;
  std::map<LabelValues, std::unique_ptr<Series>> series_;
};

// Label names and values as prometheus-cpp keys a series; throws
// std::invalid_argument when the counts differ.
prometheus::Labels labelSet(const std::string& metric, const std::vector<std::string>& names,
                            const LabelValues& values);

template <class Series>
Series& Family<Series>::with(const LabelValues& values) {
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(values);
    if (it != series_.end()) return *it->second;
  }
  prometheus::Labels labels = labelSet(name_, labelNames_, values);
  std::unique_lock lock(mu_);
  auto& slot = series_[values];
  if (!slot) slot = make_(labels);
  return *slot;
}

class Registry {
 public:
  // The family of this name, created on first use (later help and labels are
  // ignored). Throws std::invalid_argument for a name or label name
  // Prometheus does not accept, or a name taken by another metric type.
  Family<Counter>& counter(std::string name, std::string help, std::vector<std::string> labels = {});
  Family<Gauge>& gauge(std::string name, std::string help, std::vector<std::string> labels = {});
  Family<Histogram>& histogram(std::string name, std::string help, std::vector<double> bounds,
                               std::vector<std::string> labels = {});

  // Runs before every render, to refresh gauges computed from elsewhere
  // (snapshot age, informer staleness).
  void onScrape(std::function<void()> refresh);

  // The whole registry in text format 0.0.4: families in name order, series
  // in label order; a family without series is left out.
  std::string render() const;

 private:
  prometheus::Registry native_;  // first: the families below point into it
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Family<Counter>>> counters_;
  std::map<std::string, std::unique_ptr<Family<Gauge>>> gauges_;
  std::map<std::string, std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::function<void()>> refreshers_;
};

inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tally::observability
