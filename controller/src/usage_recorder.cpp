#include "tally/controller/usage_recorder.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include <algorithm>
#include <future>

#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::controller {

namespace obs = observability;

namespace {

constexpr std::string_view kKey = "usage";

runtime::Resource configMaps(const std::string& ns) { return runtime::Resource::core("configmaps", ns); }

// Today's first part by its name: one written before parts carried the day
// label is not listed by it (the recorder's next update labels it); without
// this a create would find it existing at every attempt.
runtime::Result<std::optional<codec::UsageCheckpoint>> unlabelledPart(runtime::Client& client, const std::string& ns,
                                                                      model::Timestamp day) {
  const std::string name = codec::usageConfigMapName(day);
  auto got = client.get(configMaps(ns), name);
  if (!got) {
    if (got.error().is(runtime::ErrorCode::kNotFound)) return std::optional<codec::UsageCheckpoint>();
    return std::move(got).error().withContext("configmap " + ns + "/" + name);
  }
  auto cp = codec::decodeUsageConfigMap(*got);
  if (!cp) return runtime::Error(runtime::ErrorCode::kDecode, cp.error().describe());
  return std::optional<codec::UsageCheckpoint>(std::move(cp).value());
}

}  // namespace

struct UsageRecorder::Metrics {
  explicit Metrics(obs::Registry& r)
      : flushes(r.counter("tally_controller_usage_flushes_total",
                          "Writes of the usage recorder by result: ok, sealed (a full part of a day closed; its next "
                          "part follows), conflict (re-read on 409), too_large (one hour of the holders would pass a "
                          "part's size: nothing recorded), error.",
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
    term_ = {};
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
      force || !term_.through || current != term_.holders || std::chrono::seconds(t - lastFlush_) >= options_.interval;
  if (!due) return {};
  return flush(t, current);
}

runtime::Status UsageRecorder::flush(model::Timestamp t, const std::vector<model::Holder>& current) {
  auto count = [this](std::string_view result) {
    if (metrics_) metrics_->flushes.with({result}).inc();
  };
  const model::Timestamp today = model::dayOf(t);
  for (int attempt = 0; attempt < std::max(1, options_.maxConflicts); ++attempt) {
    // Where the record stands: today's parts; when today has no `through` yet, the days before too.
    auto days = state::readUsageDays(*client_, options_.ns, today, today);
    if (days && days->empty()) {
      auto unlabelled = unlabelledPart(*client_, options_.ns, today);
      if (!unlabelled) {
        days = std::move(unlabelled).error();
      } else if (*unlabelled) {
        days->push_back(state::UsageDay{today, {std::move(**unlabelled)}});
      }
    }
    if (days &&
        std::none_of(days->begin(), days->end(), [](const state::UsageDay& d) { return d.through().has_value(); })) {
      days = state::readUsageDays(*client_, options_.ns, today - options_.lookbackDays * model::kSecondsPerDay, today);
    }
    if (!days) {
      count("error");
      return std::move(days).error();
    }
    const UsageWrite w = planUsageWrite(*days, t, term_, current, options_.maxBytes);
    if (w.action == UsageWrite::Action::kNone) return {};
    if (w.action == UsageWrite::Action::kTooLarge) {
      count("too_large");
      logError("usage record too large: not recorded",
               {{"configmap", options_.ns + "/" + w.name}, {"error", w.error}, {"limit", options_.maxBytes}});
      return runtime::Error(runtime::ErrorCode::kInvalid, "namespace " + options_.ns + ": " + w.error);
    }
    std::string body = usageConfigMapBody(options_.ns, w);
    auto written = w.action == UsageWrite::Action::kCreate
                       ? client_->create(configMaps(options_.ns), std::move(body))
                       : client_->update(configMaps(options_.ns), w.name, std::move(body));
    if (!written) {
      if (written.error().is(runtime::ErrorCode::kConflict) || written.error().is(runtime::ErrorCode::kAlreadyExists)) {
        count("conflict");
        continue;  // re-read: whoever wrote moved `through` or sealed the part; never add twice
      }
      count("error");
      return std::move(written).error().withContext("configmap " + options_.ns + "/" + w.name);
    }
    if (w.action == UsageWrite::Action::kSeal) {
      count("sealed");
      logInfo("usage: a full part sealed; the day continues in its next part",
              {{"configmap", options_.ns + "/" + w.name}, {"bytes", w.usage.size()}, {"limit", options_.maxBytes}});
      attempt = -1;  // progress: a fresh budget of conflicts
      continue;
    }
    count("ok");
    if (metrics_) {
      for (const auto& b : w.added) {
        // A class's own unit only (a pod's gpumem or gpucores is a record, not GPU units).
        if (b.holder.className.empty()) continue;
        metrics_->unitSeconds.with({b.holder.className}).inc(static_cast<std::uint64_t>(b.unitSeconds));
      }
    }
    term_ = termAfter(w, term_, t, current);
    if (!flushDone(w, t)) {
      attempt = -1;  // progress (the next day or hour): a fresh budget of conflicts
      continue;
    }
    lastFlush_ = t;
    return {};
  }
  return runtime::Error(
      runtime::ErrorCode::kConflict,
      fmt::format("usage flush: {} conflicts in a row; retried at the next check", options_.maxConflicts));
}

runtime::Result<std::string> UsageRecorder::exportLines(const UsagePeriod& period, const model::Ledger& ledger,
                                                        model::Timestamp now) const {
  auto days = state::readUsageDays(*client_, options_.ns, period.since, period.until - 1);
  if (!days) return std::move(days).error();
  return usageAnswer(*days, period, ledger, now);
}

AccessRule usageAccessRule() {
  AccessRule rule;
  rule.verb = "get";
  rule.nonResourcePath = "/usage";
  return rule;
}

runtime::http::Response answerUsage(const UsageRecorder& recorder, const SnapshotCell<state::Snapshot>& snapshots,
                                    AccessReviewer& reviewer, std::optional<std::string_view> since,
                                    std::optional<std::string_view> until, std::string_view authorization) {
  const AccessRule rule = usageAccessRule();
  auto token = bearerToken(authorization, rule, "");
  Access access;
  if (auto* refused = std::get_if<Access>(&token)) {
    access = *refused;
  } else {
    access = reviewer.review(std::get<std::string_view>(token), "");
  }
  switch (access.verdict) {
    case Access::Verdict::Unauthenticated: return accessErrorResponse(401, "Unauthorized", access.message);
    case Access::Verdict::Forbidden: return accessErrorResponse(403, "Forbidden", access.message);
    case Access::Verdict::Unknown: return accessErrorResponse(503, "ServiceUnavailable", access.message);
    case Access::Verdict::Allowed: break;
  }
  const model::Timestamp now = recorder.now();
  auto period = parseUsagePeriod(since, until, now);
  if (!period) {
    return runtime::http::plainErrorBody(400,
                                         "usage: since and until are RFC 3339 times, since required, until > since");
  }
  auto guard = snapshots.read();
  auto lines = recorder.exportLines(*period, guard->cluster().ledger, now);
  if (!lines) return runtime::http::plainErrorBody(503, "usage: " + lines.error().describe());
  runtime::http::Response r;
  r.contentType = "application/x-ndjson";
  r.body = std::move(lines).value();
  return r;
}

void addUsageRoute(runtime::http::Router& router, const UsageRecorder& recorder,
                   const SnapshotCell<state::Snapshot>& snapshots, UsageRouteOptions options) {
  if (!options.reviewer) throw std::invalid_argument("GET /usage needs an access reviewer");
  router.add("GET", "/usage", "usage",
             [&recorder, &snapshots, options](runtime::http::Request& request, runtime::http::Respond respond) {
               // The request is valid only until the handler responds: keep what is read.
               auto keep = [](std::optional<std::string_view> v) {
                 return v ? std::optional<std::string>(std::string(*v)) : std::nullopt;
               };
               auto work = [&recorder, &snapshots, reviewer = options.reviewer, since = keep(request.query("since")),
                            until = keep(request.query("until")),
                            authorization = std::string(request.header("Authorization").value_or("")),
                            respond = std::move(respond)]() mutable {
                 auto view = [](const std::optional<std::string>& v) {
                   return v ? std::optional<std::string_view>(*v) : std::nullopt;
                 };
                 runtime::http::Response r;
                 try {
                   r = answerUsage(recorder, snapshots, *reviewer, view(since), view(until), authorization);
                 } catch (const std::exception& e) {
                   r = runtime::http::plainErrorBody(500, std::string("usage: ") + e.what());
                 }
                 respond(std::move(r));
               };
               if (options.run) {
                 options.run(std::move(work));
               } else {
                 work();
               }
             });
}

}  // namespace tally::controller
