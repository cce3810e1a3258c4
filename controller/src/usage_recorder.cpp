#include "tally/controller/usage_recorder.hpp"

#include <fmt/format.h>

#include <future>

#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::controller {

namespace obs = observability;

namespace {

constexpr std::string_view kKey = "usage";

runtime::Resource configMaps(const std::string& ns) { return runtime::Resource::core("configmaps", ns); }

// The day's checkpoint, or none when its ConfigMap does not exist.
runtime::Result<std::optional<codec::UsageCheckpoint>> readDay(runtime::Client& client, const std::string& ns,
                                                               model::Timestamp day) {
  const std::string name = codec::usageConfigMapName(day);
  auto got = client.get(configMaps(ns), name);
  if (!got) {
    if (got.error().is(runtime::ErrorCode::kNotFound)) return std::optional<codec::UsageCheckpoint>();
    return std::move(got).error();
  }
  auto cp = codec::decodeUsageConfigMap(*got);
  if (!cp) {
    return runtime::Error(runtime::ErrorCode::kDecode,
                          fmt::format("configmap {}/{}: {}", ns, name, cp.error().describe()));
  }
  return std::optional<codec::UsageCheckpoint>(std::move(cp).value());
}

std::string configMapBody(const std::string& ns, const std::string& name, const std::string& resourceVersion,
                          model::Timestamp through, const std::string& usage) {
  JsonWriter w;
  w.beginObject().field("apiVersion", "v1").field("kind", "ConfigMap").key("metadata").beginObject();
  w.field("name", name).field("namespace", ns);
  if (!resourceVersion.empty()) w.field("resourceVersion", resourceVersion);
  w.key("labels")
      .beginObject()
      .field("app.kubernetes.io/managed-by", "tally-controller")
      .field("tally.dev/usage", "true");
  w.endObject().endObject();
  w.key("data").beginObject().field(codec::kUsageThroughKey, formatRfc3339(through)).field(codec::kUsageKey, usage);
  w.endObject().endObject();
  return w.str();
}

}  // namespace

struct UsageRecorder::Metrics {
  explicit Metrics(obs::Registry& r)
      : flushes(r.counter("tally_controller_usage_flushes_total",
                          "Flushes of the usage recorder by result: ok, conflict (re-read on 409), too_large (the "
                          "day's ConfigMap would pass the object size limit: nothing recorded), error.",
                          {"result"})),
        unitSeconds(r.counter("tally_controller_usage_unit_seconds_total",
                              "GPU unit-seconds the usage recorder persisted, by device class (the class's own "
                              "resource only).",
                              {"class"})) {}
  obs::Family<obs::Counter>& flushes;
  obs::Family<obs::Counter>& unitSeconds;
};

UsageRecorder::UsageRecorder(std::shared_ptr<runtime::Client> client, state::Writer& writer,
                             UsageRecorderOptions options)
    : client_(std::move(client)), writer_(writer), options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

UsageRecorder::~UsageRecorder() = default;

model::Timestamp UsageRecorder::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::vector<model::Holder> UsageRecorder::currentHolders() {
  // The live cluster (with its GPU pods) is the writer thread's.
  auto promise = std::make_shared<std::promise<std::vector<model::Holder>>>();
  auto future = promise->get_future();
  writer_.post([promise](model::UsageIndex& index) { promise->set_value(model::holdersAt(index.cluster())); }, false);
  return future.get();
}

void UsageRecorder::attach(runtime::Manager& manager) {
  runtime::ControllerOptions o;
  o.name = "usage-recorder";
  o.leaderOnly = true;
  o.onStart = [this] {
    // A new term: forget what an earlier term flushed; continue from the ConfigMaps.
    std::lock_guard lock(mu_);
    through_.reset();
    holders_.clear();
    lastFlush_ = 0;
  };
  runtime::Controller& c = manager.controller(
      std::move(o), [this](const std::string&, std::stop_token) -> runtime::Result<runtime::ReconcileResult> {
        if (auto done = tick(); !done) {
          logWarning("usage flush failed", {{"error", done.error().describe()}});
        }
        runtime::ReconcileResult r;
        r.action = runtime::ReconcileResult::Action::kRequeueAfter;
        r.after = options_.checkInterval;
        return r;
      });
  c.enqueueOnStart(std::string(kKey));
}

runtime::Status UsageRecorder::tick(bool force) {
  std::lock_guard lock(mu_);
  const model::Timestamp t = now();
  auto current = currentHolders();
  const bool due =
      force || !through_ || current != holders_ || std::chrono::seconds(t - lastFlush_) >= options_.interval;
  if (!due) return {};
  return flush(t, current);
}

runtime::Status UsageRecorder::flush(model::Timestamp t, const std::vector<model::Holder>& current) {
  auto count = [this](std::string_view result) {
    if (metrics_) metrics_->flushes.with({result}).inc();
  };
  for (int attempt = 0; attempt < std::max(1, options_.maxConflicts); ++attempt) {
    // Where the record stands: today's `through`, else the latest of the days before.
    auto today = readDay(*client_, options_.ns, t);
    if (!today) {
      count("error");
      return std::move(today).error();
    }
    std::optional<codec::UsageCheckpoint> at = *today;
    bool found = at && at->through.has_value();
    model::Timestamp from = found ? *at->through : t;
    for (int back = 1; !found && back <= options_.lookbackDays; ++back) {
      auto earlier = readDay(*client_, options_.ns, t - back * model::kSecondsPerDay);
      if (!earlier) {
        count("error");
        return std::move(earlier).error();
      }
      if (*earlier && (*earlier)->through) {
        found = true;
        from = *(*earlier)->through;
        at = *earlier;
      }
    }
    // A record ahead of this clock: nothing to add until the clock passes it.
    if (from > t) return {};
    // The holders of [from, t): those this term flushed with at `from`; at a
    // term's first flush (or when another writer moved `through`), those seen now.
    const std::vector<model::Holder>& held = (through_ && *through_ == from) ? holders_ : current;
    // A record ends at its day's end: an older day is closed first, then today.
    const model::Timestamp dayEnd = model::dayOf(from) + model::kSecondsPerDay;
    const model::Timestamp until = std::min(t, dayEnd);
    const bool sameDay = at && at->name == codec::usageConfigMapName(from);
    std::vector<model::UsageBucket> buckets = sameDay ? at->buckets : std::vector<model::UsageBucket>{};
    const std::string resourceVersion = sameDay ? at->resourceVersion : std::string();
    auto added = model::accrue(held, from, until);
    model::mergeBuckets(buckets, added);
    std::string usage = codec::usageLines(buckets);
    const std::string name = codec::usageConfigMapName(from);
    if (usage.size() > kMaxUsageBytes) {
      count("too_large");
      logError("usage record too large: not recorded",
               {{"configmap", options_.ns + "/" + name}, {"bytes", usage.size()}, {"limit", kMaxUsageBytes}});
      return runtime::Error(runtime::ErrorCode::kInvalid,
                            fmt::format("configmap {}/{} would hold {} bytes of usage (limit {})", options_.ns, name,
                                        usage.size(), kMaxUsageBytes));
    }
    std::string body = configMapBody(options_.ns, name, resourceVersion, until, usage);
    auto written = resourceVersion.empty() ? client_->create(configMaps(options_.ns), std::move(body))
                                           : client_->update(configMaps(options_.ns), name, std::move(body));
    if (!written) {
      if (written.error().is(runtime::ErrorCode::kConflict) || written.error().is(runtime::ErrorCode::kAlreadyExists)) {
        count("conflict");
        continue;  // re-read: whoever wrote moved `through`; never add twice
      }
      count("error");
      return std::move(written).error().withContext("configmap " + options_.ns + "/" + name);
    }
    count("ok");
    if (metrics_) {
      for (const auto& b : added) {
        // A class's own unit only (a pod's gpumem or gpucores is a record, not GPU units).
        if (b.holder.className.empty()) continue;
        metrics_->unitSeconds.with({b.holder.className}).inc(static_cast<std::uint64_t>(b.unitSeconds));
      }
    }
    through_ = until;
    if (until < t) {
      holders_ = held;  // [dayEnd, t) was still held by them: the next round, in the next day
      attempt = -1;     // a new day, a fresh budget of conflicts
      continue;
    }
    holders_ = current;
    lastFlush_ = t;
    return {};
  }
  return runtime::Error(
      runtime::ErrorCode::kConflict,
      fmt::format("usage flush: {} conflicts in a row; retried at the next check", options_.maxConflicts));
}

runtime::Result<std::vector<model::UsageBucket>> readUsage(runtime::Client& client, const std::string& ns,
                                                           model::Timestamp since, model::Timestamp until) {
  std::vector<model::UsageBucket> all;
  for (model::Timestamp day = model::dayOf(since); day < until; day += model::kSecondsPerDay) {
    auto cp = readDay(client, ns, day);
    if (!cp) return std::move(cp).error();
    if (*cp) model::mergeBuckets(all, (*cp)->buckets);
  }
  return model::bucketsIn(all, since, until);
}

std::string usageExport(const std::vector<model::UsageBucket>& buckets,
                        const std::vector<model::BillingWindow>& windows) {
  std::string out = codec::usageLines(buckets);
  for (const auto& w : windows) out += codec::windowLine(w) + "\n";
  return out;
}

runtime::Result<std::string> UsageRecorder::exportLines(model::Timestamp since, model::Timestamp until,
                                                        const model::Ledger& ledger) const {
  auto buckets = readUsage(*client_, options_.ns, since, until);
  if (!buckets) return std::move(buckets).error();
  return usageExport(*buckets, model::billingWindows(ledger, since, until));
}

void addUsageRoute(runtime::http::Router& router, const UsageRecorder& recorder,
                   const SnapshotCell<state::Snapshot>& snapshots) {
  router.add("GET", "/usage", "usage",
             [&recorder, &snapshots](runtime::http::Request& request, runtime::http::Respond respond) {
               auto timeParam = [&](std::string_view key,
                                    model::Timestamp fallback) -> std::optional<model::Timestamp> {
                 auto text = request.query(key);
                 if (!text || text->empty()) return fallback;
                 auto t = parseRfc3339(*text);
                 if (!t) return std::nullopt;
                 return t->seconds;
               };
               const model::Timestamp nowSeconds =
                   std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                       .count();
               auto since = timeParam("since", -1);
               auto until = timeParam("until", nowSeconds);
               if (!since || !until || *since < 0 || *until <= *since) {
                 respond(runtime::http::plainErrorBody(
                     400, "usage: since and until are RFC 3339 times, since required, until > since"));
                 return;
               }
               auto guard = snapshots.read();
               auto lines = recorder.exportLines(*since, *until, guard->cluster().ledger);
               if (!lines) {
                 respond(runtime::http::plainErrorBody(503, "usage: " + lines.error().describe()));
                 return;
               }
               runtime::http::Response r;
               r.contentType = "application/x-ndjson";
               r.body = std::move(lines).value();
               respond(std::move(r));
             });
}

}  // namespace tally::controller
