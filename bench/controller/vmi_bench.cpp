// bench_vmi: tally-controller's VM door end to end, against a real API server
// calling its VMI mutating webhook (bench/controller/vmi.sh sets the cluster
// up and starts the controller; this program only talks to the API server and
// scrapes the controller's /metrics).
//
//  * latency: VMIs created one after the other through one keep-alive client,
//    each naming one device template of 1..4 GPUs (one in `--held-every` also
//    a held GPUDevice created and Bound before, untimed), each followed by a
//    VMI without Tally annotations (the matchConditions keep it away from the
//    webhook): the baseline of the same API server and client. The client's
//    wall time of every create, and the webhook's own histograms
//    (tally_controller_vmi_review_seconds, ..._placement_wait_seconds) as the
//    difference of two scrapes, their quantiles interpolated in the buckets;
//  * race: rounds of `--racers` VMIs (`--threads` threads, one shared client)
//    naming one held device; exactly one must be admitted per round (checked:
//    the device's status.attachedTo names it). Between rounds the winner is
//    deleted and the device's attachment waited out. Conflicts are
//    tally_controller_vmi_attach_conflicts_total's growth.
//
// Exits 1 when a round admits other than one VMI, a Tally VMI is refused, or
// an admitted VMI does not ask for its GPUs; 2 when the cluster misbehaves.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <simdjson.h>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tally/common/log.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/config.hpp"

using namespace tally;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

struct Options {
  std::string kubeconfig;
  std::string metricsUrl;
  std::string className = "nvidia-h200-passthrough";
  std::string latencyNamespace = "bench-vmi";
  std::string raceNamespace = "bench-race";
  std::size_t nodes = 0;  // for the report only
  std::size_t vmis = 300;
  std::size_t heldEvery = 4;
  std::size_t warmup = 5;
  std::size_t rounds = 10;
  std::size_t racers = 20;
  std::size_t threads = 10;
};

struct Summary {
  double p50 = 0, p99 = 0, max = 0, mean = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  s.max = v.back();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

double millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void report(const char* what, std::size_t n, const Summary& s) {
  std::printf("  %-50s n=%-4zu p50=%8.1f ms  p99=%8.1f ms  max=%8.1f ms  mean=%8.1f ms\n", what, n, s.p50, s.p99, s.max,
              s.mean);
  std::fflush(stdout);
}

// The cluster misbehaved (not a finding about Tally): stop with exit code 2.
struct ClusterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- the controller's /metrics, Prometheus text --------------------------

std::string scrape(const std::string& url) {
  const std::string command = "curl -s --max-time 5 '" + url + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw ClusterError("cannot run curl for " + url);
  std::string out;
  char buf[8192];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe.get())) > 0;) out.append(buf, n);
  if (out.empty()) throw ClusterError("no metrics from " + url);
  return out;
}

// The value of the sample whose name and labels are exactly `series`
// ("name" or "name{a=\"b\"}"); 0 when absent.
double sample(const std::string& text, const std::string& series) {
  const std::string needle = "\n" + series + " ";
  const auto at = text.find(needle);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + needle.size(), 32));
}

// One histogram: cumulative counts by upper bound (+Inf last).
struct Histogram {
  std::vector<std::pair<double, double>> buckets;
  double count = 0, sum = 0;
};

// `labels`: the series' labels before le, each followed by a comma
// ("webhook=\"gpudevices\","), empty for a histogram without labels.
Histogram histogramOf(const std::string& text, const std::string& name, const std::string& labels = "") {
  Histogram h;
  const std::string prefix = name + "_bucket{" + labels + "le=\"";
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    const auto close = text.find("\"}", at + prefix.size());
    const std::string le = text.substr(at + prefix.size(), close - at - prefix.size());
    const double bound = le == "+Inf" ? INFINITY : std::stod(le);
    h.buckets.emplace_back(bound, std::stod(text.substr(close + 3, 32)));
  }
  const std::string selector = labels.empty() ? "" : "{" + labels.substr(0, labels.size() - 1) + "}";
  h.count = sample(text, name + "_count" + selector);
  h.sum = sample(text, name + "_sum" + selector);
  return h;
}

Histogram growth(const Histogram& before, const Histogram& after) {
  Histogram d = after;
  for (std::size_t i = 0; i < d.buckets.size() && i < before.buckets.size(); ++i) {
    d.buckets[i].second -= before.buckets[i].second;
  }
  d.count -= before.count;
  d.sum -= before.sum;
  return d;
}

// The q-quantile as Prometheus' histogram_quantile computes it: linear within
// the bucket that holds the rank; the highest finite bound past it.
double quantile(const Histogram& h, double q) {
  if (h.count <= 0 || h.buckets.empty()) return 0;
  const double rank = q * h.count;
  double lower = 0, below = 0;
  for (const auto& [bound, cumulative] : h.buckets) {
    if (cumulative >= rank) {
      if (std::isinf(bound)) return lower;
      const double inBucket = cumulative - below;
      return inBucket <= 0 ? bound : lower + (bound - lower) * (rank - below) / inBucket;
    }
    lower = bound;
    below = cumulative;
  }
  return lower;
}

// "(16, 32] ms": the bucket that holds the q-quantile.
std::string bucketOf(const Histogram& h, double q) {
  const double rank = q * h.count;
  double lower = 0;
  for (const auto& [bound, cumulative] : h.buckets) {
    if (cumulative >= rank) {
      char buf[64];
      if (std::isinf(bound)) {
        std::snprintf(buf, sizeof buf, "> %.0f ms", lower * 1e3);
      } else {
        std::snprintf(buf, sizeof buf, "(%.0f, %.0f] ms", lower * 1e3, bound * 1e3);
      }
      return buf;
    }
    lower = bound;
  }
  return "none";
}

void reportHistogram(const char* what, const Histogram& h) {
  std::printf("  %-50s n=%-4.0f p50=%8.1f ms %-14s p99=%8.1f ms %-14s mean=%8.1f ms\n", what, h.count,
              quantile(h, 0.5) * 1e3, bucketOf(h, 0.5).c_str(), quantile(h, 0.99) * 1e3, bucketOf(h, 0.99).c_str(),
              h.count > 0 ? h.sum / h.count * 1e3 : 0.0);
  std::fflush(stdout);
}

// ---- objects -------------------------------------------------------------

runtime::Resource vmisIn(const std::string& ns) {
  return runtime::Resource::of("kubevirt.io", "v1", "virtualmachineinstances", ns);
}
runtime::Resource devicesIn(const std::string& ns) {
  return runtime::Resource::of("gpu.tally.dev", "v1alpha1", "gpudevices", ns);
}

// A VMI; `held` names a held GPUDevice, `templateCount` > 0 asks for one
// template device of that many GPUs; neither: no Tally annotation at all.
std::string vmiBody(const Options& o, const std::string& ns, const std::string& name, const std::string& held,
                    std::size_t templateCount) {
  std::string annotations;
  if (!held.empty()) annotations = "\"gpu.tally.dev/devices\":" + jsonString(held);
  if (templateCount > 0) {
    const std::string templates =
        "[{\"class\":" + jsonString(o.className) + ",\"count\":" + std::to_string(templateCount) + "}]";
    annotations +=
        (annotations.empty() ? "" : ",") + std::string("\"gpu.tally.dev/device-templates\":") + jsonString(templates);
  }
  return "{\"apiVersion\":\"kubevirt.io/v1\",\"kind\":\"VirtualMachineInstance\",\"metadata\":{\"name\":" +
         jsonString(name) + ",\"namespace\":" + jsonString(ns) + ",\"annotations\":{" + annotations +
         "}},\"spec\":{\"domain\":{\"devices\":{\"disks\":[]},\"resources\":{\"requests\":{\"memory\":\"1Gi\"}}}}}";
}

std::string heldBody(const Options& o, const std::string& ns, const std::string& name) {
  return "{\"apiVersion\":\"gpu.tally.dev/v1alpha1\",\"kind\":\"GPUDevice\",\"metadata\":{\"name\":" +
         jsonString(name) + ",\"namespace\":" + jsonString(ns) + "},\"spec\":{\"class\":" + jsonString(o.className) +
         ",\"count\":1}}";
}

// A string at a JSON pointer of `body`; empty when absent.
std::string stringAt(const std::string& body, const char* pointer) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  std::string_view value;
  if (parser.iterate(padded).get(doc) || doc.at_pointer(pointer).get_string().get(value)) return {};
  return std::string(value);
}

// spec.domain.devices.gpus[] entries of an admitted VMI.
std::size_t gpusOf(const std::string& body) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::array gpus;
  if (parser.iterate(padded).get(doc) || doc.at_pointer("/spec/domain/devices/gpus").get_array().get(gpus)) return 0;
  std::size_t n = 0;
  for (auto gpu : gpus) {
    (void)gpu;
    ++n;
  }
  return n;
}

template <class F>
bool waitFor(F&& done, std::chrono::milliseconds limit, std::chrono::milliseconds every = 20ms) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(every);
  }
  return done();
}

std::string phaseOf(runtime::Client& client, const std::string& ns, const std::string& name) {
  auto body = client.get(devicesIn(ns), name);
  return body ? stringAt(*body, "/status/phase") : std::string();
}

void createBoundDevice(const Options& o, runtime::Client& client, const std::string& ns, const std::string& name) {
  auto made = client.create(devicesIn(ns), heldBody(o, ns, name));
  if (!made) throw ClusterError("creating gpudevice/" + ns + "/" + name + ": " + made.error().describe());
  if (!waitFor([&] { return phaseOf(client, ns, name) == "Bound"; }, 60s)) {
    throw ClusterError("gpudevice/" + ns + "/" + name + " not Bound after 60 s");
  }
}

// Names of the GPUDevices in `ns` that a VMI's template made.
std::size_t templateDevices(runtime::Client& client, const std::string& ns) {
  auto page = client.list(devicesIn(ns), {});
  if (!page) throw ClusterError("listing gpudevices in " + ns + ": " + page.error().describe());
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(page->body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::array items;
  if (parser.iterate(padded).get(doc) || doc["items"].get_array().get(items)) return 0;
  std::size_t n = 0;
  for (auto item : items) {
    simdjson::ondemand::object annotations;
    if (item["metadata"]["annotations"].get_object().get(annotations)) continue;
    std::string_view ignored;
    n += !annotations["gpu.tally.dev/template-of"].get_string().get(ignored);
  }
  return n;
}

// Deletes `name`; a failure is printed, not fatal (the cluster goes anyway).
void removeOrSay(runtime::Client& client, const runtime::Resource& res, const std::string& name) {
  auto gone = client.remove(res, name);
  if (!gone && !gone.error().is(runtime::ErrorCode::kNotFound)) {
    std::printf("  deleting %s %s: %s\n", res.describe().c_str(), name.c_str(), gone.error().describe().c_str());
  }
}

// "[DeviceAttached]" from a refusal's message, else the first 60 characters.
std::string reasonOf(const std::string& message) {
  const auto open = message.find('[');
  const auto close = open == std::string::npos ? open : message.find(']', open);
  return close == std::string::npos ? message.substr(0, 60) : message.substr(open, close - open + 1);
}

// ---- 1. latency ----------------------------------------------------------

int measureLatency(const Options& o, runtime::Client& client) {
  const std::string& ns = o.latencyNamespace;
  std::vector<std::string> created;
  std::size_t failures = 0;
  std::map<std::string, std::size_t> refusals;
  std::vector<double> refusedMs;
  // make(name, held, count, gpus): the create's wall time in ms when admitted
  // with `gpus` gpus[] entries, negative when refused (a refusal with a model
  // code is an answer, timed in refusedMs; anything else a failure).
  auto make = [&](const std::string& name, const std::string& held, std::size_t count, std::size_t wantGpus) {
    const std::string body = vmiBody(o, ns, name, held, count);
    const auto t0 = Clock::now();
    auto answer = client.create(vmisIn(ns), body);
    const double ms = millis(Clock::now() - t0);
    if (!answer) {
      const std::string message = answer.error().describe();
      if (message.find("denied the request") != std::string::npos) {
        refusedMs.push_back(ms);
        if (refusals[reasonOf(message)]++ == 0) std::printf("  first refusal: %s\n", message.c_str());
      } else if (failures++ < 10) {
        std::printf("  FAILED %s: %s\n", name.c_str(), message.c_str());
      }
      return -1.0;
    }
    created.push_back(name);
    const std::size_t gpus = gpusOf(*answer);
    if (gpus != wantGpus && failures++ < 10) {
      std::printf("  %s admitted with %zu gpus[] entries, not %zu\n", name.c_str(), gpus, wantGpus);
    }
    return ms;
  };
  for (std::size_t i = 0; i < o.warmup; ++i) {
    make("warm-tally-" + std::to_string(i), "", 1 + i % 4, 1 + i % 4);
    make("warm-plain-" + std::to_string(i), "", 0, 0);
  }
  refusals.clear();
  refusedMs.clear();
  // Template only; a held device only (attached, nothing to wait for); a held
  // device and a template of one GPU, which must go on the held device's node.
  std::vector<double> templateOnly, heldOnly, heldAndTemplate, withoutTally;
  std::vector<double> heldBound;  // a held device's create to Bound as this client polls it (untimed setup)
  double heldSetup = 0;
  std::size_t heldSeen = 0;
  const std::string before = scrape(o.metricsUrl);
  const auto started = Clock::now();
  for (std::size_t i = 0; i < o.vmis; ++i) {
    std::size_t count = 1 + i % 4;
    std::string held;
    if (o.heldEvery > 0 && i % o.heldEvery == 0) {
      held = "held-" + std::to_string(i);
      const auto h0 = Clock::now();
      createBoundDevice(o, client, ns, held);
      heldBound.push_back(millis(Clock::now() - h0));
      heldSetup += heldBound.back() / 1e3;
      count = heldSeen++ % 2 == 0 ? 0 : 1;
    }
    const double tallyMs = make("tally-" + std::to_string(i), held, count, count + (held.empty() ? 0 : 1));
    if (tallyMs >= 0) (held.empty() ? templateOnly : count == 0 ? heldOnly : heldAndTemplate).push_back(tallyMs);
    const double plainMs = make("plain-" + std::to_string(i), "", 0, 0);
    if (plainMs >= 0) withoutTally.push_back(plainMs);
  }
  const double elapsed = seconds(Clock::now() - started) - heldSetup;
  const std::string after = scrape(o.metricsUrl);

  std::vector<double> all = templateOnly;
  all.insert(all.end(), heldOnly.begin(), heldOnly.end());
  all.insert(all.end(), heldAndTemplate.begin(), heldAndTemplate.end());
  std::printf(
      "== VM door latency: %zu nodes, %zu VMIs with Tally devices (a template of 1..4 GPUs; 1 in %zu a held"
      " device instead, alone or with a template of 1), each followed by one without; one keep-alive"
      " client, one create after the other\n",
      o.nodes, o.vmis, o.heldEvery);
  report("create with Tally devices, admitted (client)", all.size(), summarize(all));
  report("  of which template only", templateOnly.size(), summarize(templateOnly));
  report("  of which held device only", heldOnly.size(), summarize(heldOnly));
  report("  of which held device + template", heldAndTemplate.size(), summarize(heldAndTemplate));
  report("create with Tally devices, refused (client)", refusedMs.size(), summarize(refusedMs));
  for (const auto& [reason, n] : refusals) std::printf("    refused %s: %zu\n", reason.c_str(), n);
  report("create without Tally annotations (baseline)", withoutTally.size(), summarize(withoutTally));
  const Summary a = summarize(all), b = summarize(withoutTally);
  std::printf("  %-50s p50=%8.1f ms  p99=%8.1f ms\n", "with minus without", a.p50 - b.p50, a.p99 - b.p99);
  const Histogram review = growth(histogramOf(before, "tally_controller_vmi_review_seconds"),
                                  histogramOf(after, "tally_controller_vmi_review_seconds"));
  const Histogram wait = growth(histogramOf(before, "tally_controller_vmi_placement_wait_seconds"),
                                histogramOf(after, "tally_controller_vmi_placement_wait_seconds"));
  reportHistogram("webhook review (server histogram, interpolated)", review);
  reportHistogram("  of which the wait for the binder", wait);
  const std::string vmiRoute = "webhook=\"virtualmachineinstances\",";
  reportHistogram("  the route's timer (finer buckets, from 0.1 ms)",
                  growth(histogramOf(before, "tally_webhook_duration_seconds", vmiRoute),
                         histogramOf(after, "tally_webhook_duration_seconds", vmiRoute)));
  const Histogram placed = growth(histogramOf(before, "tally_controller_binder_placement_seconds"),
                                  histogramOf(after, "tally_controller_binder_placement_seconds"));
  // The binder observes whole seconds (creationTimestamp to now): only the
  // split between 0 s and 1 s or more means anything.
  const double zero = placed.buckets.empty() ? 0 : placed.buckets.front().second;
  std::printf("  %-50s n=%-4.0f 0 s: %.0f, 1 s or more: %.0f (whole seconds: a second boundary crossed)\n",
              "binder placement_seconds (creation to Bound)", placed.count, zero, placed.count - zero);
  report("  held devices: create to Bound (client, 20 ms polls)", heldBound.size(), summarize(heldBound));
  const std::string gpuDevices = "webhook=\"gpudevices\",";
  const Histogram deviceReviews = growth(histogramOf(before, "tally_webhook_duration_seconds", gpuDevices),
                                         histogramOf(after, "tally_webhook_duration_seconds", gpuDevices));
  reportHistogram("GPUDevice webhook reviews meanwhile", deviceReviews);
  const char* results[] = {"admitted", "refused", "dry-run", "reinvoked"};
  std::printf("  reviews by result:");
  for (const char* r : results) {
    const std::string series = std::string("tally_controller_vmi_reviews_total{result=\"") + r + "\"}";
    std::printf(" %s %.0f", r, sample(after, series) - sample(before, series));
  }
  std::printf("; %.0f VMIs/s with their baselines (held device setup excluded)\n",
              static_cast<double>(all.size() + refusedMs.size() + withoutTally.size()) / elapsed);
  std::printf("  goal p99 <= 100 ms with Tally devices (client): %s (%.1f ms); server-side p99 %.1f ms\n",
              a.p99 <= 100 ? "met" : "NOT met", a.p99, quantile(review, 0.99) * 1e3);
  std::fflush(stdout);

  // Deleted: the binder deletes the template devices and detaches the held ones.
  const auto d0 = Clock::now();
  for (const auto& name : created) {
    auto gone = client.remove(vmisIn(ns), name);
    if (!gone && !gone.error().is(runtime::ErrorCode::kNotFound)) {
      throw ClusterError("deleting vmi/" + ns + "/" + name + ": " + gone.error().describe());
    }
  }
  const bool released = waitFor([&] { return templateDevices(client, ns) == 0; }, 300s, 500ms);
  std::printf("  cleanup: %zu VMIs deleted; template devices %s %.1f s after the first delete\n", created.size(),
              released ? "all gone" : "NOT all gone", seconds(Clock::now() - d0));
  for (std::size_t i = 0; o.heldEvery > 0 && i < o.vmis; i += o.heldEvery) {
    removeOrSay(client, devicesIn(ns), "held-" + std::to_string(i));
  }
  std::fflush(stdout);
  return failures == 0 && released ? 0 : 1;
}

// ---- 2. attach race ------------------------------------------------------

struct Round {
  std::size_t admitted = 0, refused = 0, errors = 0;
  std::string winner;
  std::map<std::string, std::size_t> reasons;
  double seconds = 0;
};

Round race(const Options& o, runtime::Client& client, std::size_t round) {
  const std::string& ns = o.raceNamespace;
  Round r;
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (std::size_t t = 0; t < o.threads; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next.fetch_add(1)) < o.racers;) {
        const std::string name = "race-" + std::to_string(round) + "-" + std::to_string(i);
        auto answer = client.create(vmisIn(ns), vmiBody(o, ns, name, "contested", 0));
        std::lock_guard lock(mu);
        if (answer) {
          ++r.admitted;
          r.winner = name;
          continue;
        }
        const std::string message = answer.error().describe();
        if (message.find("denied the request") != std::string::npos) {
          ++r.refused;
        } else {
          ++r.errors;
          std::printf("  round %zu: %s failed: %s\n", round, name.c_str(), message.c_str());
        }
        ++r.reasons[reasonOf(message)];
      }
    });
  }
  for (auto& t : threads) t.join();
  r.seconds = seconds(Clock::now() - t0);
  return r;
}

int measureRace(const Options& o, runtime::Client& client) {
  const std::string& ns = o.raceNamespace;
  createBoundDevice(o, client, ns, "contested");
  const std::string conflictsSeries = "tally_controller_vmi_attach_conflicts_total";
  const double conflicts0 = sample(scrape(o.metricsUrl), conflictsSeries);
  std::printf("== VM door attach race: %zu rounds of %zu VMIs (%zu threads, one client) for one held GPUDevice\n",
              o.rounds, o.racers, o.threads);
  double raceSeconds = 0, detachSeconds = 0, previous = conflicts0;
  std::size_t bad = 0;
  const auto started = Clock::now();
  for (std::size_t round = 1; round <= o.rounds; ++round) {
    Round r = race(o, client, round);
    raceSeconds += r.seconds;
    const double conflicts = sample(scrape(o.metricsUrl), conflictsSeries);
    std::string holder;
    if (auto body = client.get(devicesIn(ns), "contested")) holder = stringAt(*body, "/status/attachedTo/name");
    std::printf("  round %2zu: %.3f s, %zu admitted (%s), %zu refused, %zu errors, %.0f conflicts;", round, r.seconds,
                r.admitted, r.winner.c_str(), r.refused, r.errors, conflicts - previous);
    for (const auto& [reason, n] : r.reasons) std::printf(" %s %zu", reason.c_str(), n);
    std::printf("\n");
    previous = conflicts;
    if (r.admitted != 1 || holder != r.winner) {
      ++bad;
      std::printf("  ROUND %zu BROKEN: %zu admitted, the device attached to '%s'\n", round, r.admitted, holder.c_str());
    }
    // The winner stops: the binder detaches the device (status.attachedTo gone).
    const auto d0 = Clock::now();
    if (!r.winner.empty()) removeOrSay(client, vmisIn(ns), r.winner);
    const bool detached = waitFor(
        [&] {
          auto body = client.get(devicesIn(ns), "contested");
          return body && stringAt(*body, "/status/attachedTo/name").empty();
        },
        60s);
    detachSeconds += seconds(Clock::now() - d0);
    if (!detached) throw ClusterError("gpudevice/" + ns + "/contested still attached 60 s after its VMI's delete");
  }
  const double wall = seconds(Clock::now() - started);
  const double conflicts = previous - conflicts0;
  std::printf(
      "  %zu rounds: racing %.2f s (%.2f rounds/s, %.0f VMI answers/s), %.0f attach conflicts read again"
      " and decided again: %.1f conflicts resolved/s while racing; with the detach waits (%.2f s) %.2f"
      " rounds/s; rounds with other than one admitted: %zu\n",
      o.rounds, raceSeconds, static_cast<double>(o.rounds) / raceSeconds,
      static_cast<double>(o.rounds * o.racers) / raceSeconds, conflicts, conflicts / raceSeconds, detachSeconds,
      static_cast<double>(o.rounds) / wall, bad);
  std::fflush(stdout);
  removeOrSay(client, devicesIn(ns), "contested");
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_vmi: the VMI webhook's latency and attach race end to end (see bench/controller/vmi.sh)"};
  Options o;
  app.add_option("--kubeconfig", o.kubeconfig, "Kubeconfig of the cluster")->required();
  app.add_option("--metrics-url", o.metricsUrl, "tally-controller's /metrics")->required();
  app.add_option("--class", o.className, "GPUDeviceClass of the templates and held devices")->capture_default_str();
  app.add_option("--latency-namespace", o.latencyNamespace)->capture_default_str();
  app.add_option("--race-namespace", o.raceNamespace)->capture_default_str();
  app.add_option("--nodes", o.nodes, "Nodes in the cluster (printed)")->capture_default_str();
  app.add_option("--vmis", o.vmis, "Timed VMIs with Tally devices (and as many without)")->capture_default_str();
  app.add_option("--held-every", o.heldEvery, "One VMI in this many also names a held device (0: none)")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "Untimed pairs first")->capture_default_str();
  app.add_option("--rounds", o.rounds, "Attach race rounds (0: no race)")->capture_default_str();
  app.add_option("--racers", o.racers, "VMIs per round")->capture_default_str();
  app.add_option("--threads", o.threads, "Threads sending them")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  setLogLevel(LogLevel::kError);
  try {
    auto config = runtime::loadKubeconfig(o.kubeconfig);
    if (!config) throw ClusterError("kubeconfig: " + config.error().describe());
    auto client = runtime::Client::create(std::move(*config));
    if (!client) throw ClusterError("client: " + client.error().describe());
    int failed = 0;
    if (o.vmis > 0) failed |= measureLatency(o, **client);
    if (o.rounds > 0) failed |= measureRace(o, **client);
    return failed;
  } catch (const ClusterError& e) {
    std::printf("bench_vmi: %s\n", e.what());
    return 2;
  }
}
