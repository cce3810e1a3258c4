#include "tally/observability/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>
#include <stdexcept>

namespace tally::observability {

Histogram::Histogram(const std::vector<double>& bounds) : bounds_(bounds) {
  std::sort(bounds_.begin(), bounds_.end());
  buckets_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double v) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<std::uint64_t> Histogram::cumulative() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

std::vector<double> exponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

namespace {

void checkName(const std::string& name) {
  if (name.empty()) throw std::invalid_argument("metric name is empty");
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) throw std::invalid_argument("metric name " + name + " is not a valid Prometheus name");
  }
}

template <class Series>
Family<Series>& findOrAdd(std::map<std::string, std::unique_ptr<Family<Series>>>& families, std::string name,
                          std::string help, std::vector<std::string> labels,
                          std::function<std::unique_ptr<Series>()> make) {
  checkName(name);
  auto& slot = families[name];
  if (!slot) slot = std::make_unique<Family<Series>>(std::move(name), std::move(help), std::move(labels), std::move(make));
  return *slot;
}

std::string escapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void appendLabels(std::string& out, const std::vector<std::string>& names, const LabelValues& values,
                  std::string_view extraName = {}, std::string_view extraValue = {}) {
  if (names.empty() && extraName.empty()) return;
  out += '{';
  bool first = true;
  for (std::size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    out += escapeLabelValue(values[i]);
    out += '"';
  }
  if (!extraName.empty()) {
    if (!first) out += ',';
    out += extraName;
    out += "=\"";
    out += extraValue;
    out += '"';
  }
  out += '}';
}

void appendHeader(std::string& out, const std::string& name, const std::string& help, std::string_view type) {
  out += "# HELP " + name + " " + escapeHelp(help) + "\n";
  out += "# TYPE " + name + " ";
  out += type;
  out += '\n';
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string formatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, res.ptr);
}

Family<Counter>& Registry::counter(std::string name, std::string help, std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  return findOrAdd<Counter>(counters_, std::move(name), std::move(help), std::move(labels),
                            [] { return std::make_unique<Counter>(); });
}

Family<Gauge>& Registry::gauge(std::string name, std::string help, std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  return findOrAdd<Gauge>(gauges_, std::move(name), std::move(help), std::move(labels),
                          [] { return std::make_unique<Gauge>(); });
}

Family<Histogram>& Registry::histogram(std::string name, std::string help, std::vector<double> bounds,
                                       std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  return findOrAdd<Histogram>(histograms_, std::move(name), std::move(help), std::move(labels),
                              [bounds] { return std::make_unique<Histogram>(bounds); });
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

  std::lock_guard lock(mu_);
  // Merge the three kinds into one name order so output is stable.
  std::map<std::string_view, std::function<void(std::string&)>> writers;
  for (const auto& [name, fam] : counters_) {
    writers[name] = [f = fam.get()](std::string& out) {
      appendHeader(out, f->name(), f->help(), "counter");
      f->forEach([&](const LabelValues& values, const Counter& c) {
        out += f->name();
        appendLabels(out, f->labelNames(), values);
        out += ' ' + std::to_string(c.value()) + '\n';
      });
    };
  }
  for (const auto& [name, fam] : gauges_) {
    writers[name] = [f = fam.get()](std::string& out) {
      appendHeader(out, f->name(), f->help(), "gauge");
      f->forEach([&](const LabelValues& values, const Gauge& g) {
        out += f->name();
        appendLabels(out, f->labelNames(), values);
        out += ' ' + formatValue(g.value()) + '\n';
      });
    };
  }
  for (const auto& [name, fam] : histograms_) {
    writers[name] = [f = fam.get()](std::string& out) {
      appendHeader(out, f->name(), f->help(), "histogram");
      f->forEach([&](const LabelValues& values, const Histogram& h) {
        // Read count before the buckets: a concurrent observe may land in a
        // bucket after, never making +Inf smaller than _count claims.
        std::uint64_t count = h.count();
        double sum = h.sum();
        std::vector<std::uint64_t> cum = h.cumulative();
        for (std::size_t i = 0; i < h.bounds().size(); ++i) {
          out += f->name() + "_bucket";
          appendLabels(out, f->labelNames(), values, "le", formatValue(h.bounds()[i]));
          out += ' ' + std::to_string(cum[i]) + '\n';
        }
        std::uint64_t inf = std::max(cum.back(), count);
        out += f->name() + "_bucket";
        appendLabels(out, f->labelNames(), values, "le", "+Inf");
        out += ' ' + std::to_string(inf) + '\n';
        out += f->name() + "_sum";
        appendLabels(out, f->labelNames(), values);
        out += ' ' + formatValue(sum) + '\n';
        out += f->name() + "_count";
        appendLabels(out, f->labelNames(), values);
        out += ' ' + std::to_string(inf) + '\n';
      });
    };
  }
  std::string out;
  for (auto& [name, write] : writers) write(out);
  return out;
}

}  // namespace tally::observability
