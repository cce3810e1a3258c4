#include "tally/observability/metrics.hpp"

#include <prometheus/check_names.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <stdexcept>

namespace tally::observability {

std::vector<std::uint64_t> Histogram::cumulative() const {
  prometheus::ClientMetric::Histogram h = series_->Collect().histogram;
  std::vector<std::uint64_t> out;
  out.reserve(h.bucket.size());
  for (const auto& b : h.bucket) out.push_back(b.cumulative_count);
  return out;
}

std::uint64_t Histogram::count() const { return series_->Collect().histogram.sample_count; }

double Histogram::sum() const { return series_->Collect().histogram.sample_sum; }

std::vector<double> exponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

prometheus::Labels labelSet(const std::string& metric, const std::vector<std::string>& names,
                            const LabelValues& values) {
  if (names.size() != values.size()) {
    throw std::invalid_argument("metric " + metric + " has " + std::to_string(names.size()) + " labels, given " +
                                std::to_string(values.size()) + " values");
  }
  prometheus::Labels labels;
  for (std::size_t i = 0; i < names.size(); ++i) labels.emplace(names[i], values[i]);
  return labels;
}

namespace {

// prometheus-cpp 1.0 writes HELP as given; the text format wants backslash
// and newline escaped there.
std::string escapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// prometheus-cpp checks label names only when a series is first added, which
// may be on a request path; a bad name is a programming error caught here.
void checkLabelNames(const std::string& metric, const std::vector<std::string>& labels) {
  for (const auto& l : labels) {
    if (!prometheus::CheckLabelName(l) || l == "le") {
      throw std::invalid_argument("metric " + metric + ": " + l + " is not a valid label name");
    }
  }
}

template <class Series, class Create>
Family<Series>& findOrAdd(std::map<std::string, std::unique_ptr<Family<Series>>>& families, const std::string& name,
                          const std::vector<std::string>& labels, Create create) {
  auto it = families.find(name);
  if (it != families.end()) return *it->second;
  checkLabelNames(name, labels);
  std::unique_ptr<Family<Series>> family = create();
  return *families.emplace(name, std::move(family)).first->second;
}

bool byLabels(const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) { return a.label < b.label; }

}  // namespace

Family<Counter>& Registry::counter(std::string name, std::string help, std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  return findOrAdd(counters_, name, labels, [&] {
    auto& native = prometheus::BuildCounter().Name(name).Help(escapeHelp(help)).Register(native_);
    return std::make_unique<Family<Counter>>(name, std::move(labels), [&native](const prometheus::Labels& l) {
      return std::make_unique<Counter>(native.Add(l));
    });
  });
}

Family<Gauge>& Registry::gauge(std::string name, std::string help, std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  return findOrAdd(gauges_, name, labels, [&] {
    auto& native = prometheus::BuildGauge().Name(name).Help(escapeHelp(help)).Register(native_);
    return std::make_unique<Family<Gauge>>(name, std::move(labels), [&native](const prometheus::Labels& l) {
      return std::make_unique<Gauge>(native.Add(l));
    });
  });
}

Family<Histogram>& Registry::histogram(std::string name, std::string help, std::vector<double> bounds,
                                       std::vector<std::string> labels) {
  std::sort(bounds.begin(), bounds.end());
  std::lock_guard lock(mu_);
  return findOrAdd(histograms_, name, labels, [&] {
    auto& native = prometheus::BuildHistogram().Name(name).Help(escapeHelp(help)).Register(native_);
    return std::make_unique<Family<Histogram>>(name, std::move(labels),
                                               [&native, bounds = std::move(bounds)](const prometheus::Labels& l) {
                                                 return std::make_unique<Histogram>(native.Add(l, bounds), bounds);
                                               });
  });
}

void Registry::onScrape(std::function<void()> refresh) {
  std::lock_guard lock(mu_);
  refreshers_.push_back(std::move(refresh));
}

std::string Registry::render() const {
  std::vector<std::function<void()>> refreshers;
  {
    std::lock_guard lock(mu_);
    refreshers = refreshers_;
  }
  for (auto& r : refreshers) r();

  // prometheus-cpp collects families in registration order and series in hash
  // order; sorting both keeps the exposition stable from scrape to scrape.
  std::vector<prometheus::MetricFamily> families = native_.Collect();
  std::sort(families.begin(), families.end(),
            [](const prometheus::MetricFamily& a, const prometheus::MetricFamily& b) { return a.name < b.name; });
  for (auto& f : families) std::sort(f.metric.begin(), f.metric.end(), byLabels);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace tally::observability
