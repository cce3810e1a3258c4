#include "tally/extender/metrics.hpp"

namespace tally::extender {

namespace obs = tally::observability;

namespace {
constexpr std::string_view kResultNames[kFilterResultKinds] = {"pass", "failed", "unresolvable", "error"};
constexpr std::string_view kVerbRoutes[] = {"filter", "prioritize", "preempt", "bind"};

// The series in `slot`, looked up the first time. Two threads may both look
// up; the family hands them the same series.
template <class Series, class Lookup>
Series& held(std::atomic<Series*>& slot, Lookup lookup) {
  Series* series = slot.load(std::memory_order_acquire);
  if (!series) {
    series = &lookup();
    slot.store(series, std::memory_order_release);
  }
  return *series;
}
}  // namespace

ExtenderMetrics::ExtenderMetrics(obs::Registry& registry)
    : snapshotAge(registry.gauge("tally_extender_snapshot_age_seconds", "Age of the snapshot requests read now.")
                      .with(obs::LabelValues{})),
      snapshotGeneration(registry.gauge("tally_extender_snapshot_generation", "Snapshots published since start.")
                             .with(obs::LabelValues{})),
      publishDuration(registry
                          .histogram("tally_extender_snapshot_publish_duration_seconds",
                                     "Time to build and publish one snapshot.", obs::exponentialBuckets(0.0001, 2, 16))
                          .with(obs::LabelValues{})),
      assumedPlacements(registry
                            .gauge("tally_extender_assumed_placements",
                                   "Placements recorded by bind and not yet confirmed by the watch.")
                            .with(obs::LabelValues{})),
      assumptionsExpired(registry
                             .counter("tally_extender_assumptions_expired_total",
                                      "Assumed placements dropped by their TTL (a bind the watch never confirmed).")
                             .with(obs::LabelValues{})),
      bindPodArrived(registry
                         .counter("tally_extender_bind_pod_waits_total",
                                  "Binds for a pod the pod watch had not delivered yet, which waited for its event "
                                  "(--bind-pod-wait): result arrived (then decided as usual) or timed_out (refused, "
                                  "the scheduler retries).",
                                  {"result"})
                         .with({"arrived"})),
      bindPodWaitTimedOut(registry.counter("tally_extender_bind_pod_waits_total", "", {"result"}).with({"timed_out"})),
      bindPostLimit(registry
                        .gauge("tally_extender_bind_post_limit",
                               "Binding POSTs allowed at once: --bind-threads at most, fewer while the API server "
                               "answers slower than --bind-post-target.")
                        .with(obs::LabelValues{})),
      bindPostsInFlight(
          registry.gauge("tally_extender_bind_posts_in_flight", "Binding POSTs running now.").with(obs::LabelValues{})),
      unchangedUpdates(registry
                           .counter("tally_extender_informer_unchanged_total",
                                    "Watch updates that decoded to what the cache held (heartbeats, fields the "
                                    "model does not read) and were dropped.")
                           .with(obs::LabelValues{})),
      clusterCopies(registry
                        .counter("tally_extender_snapshot_cluster_copies_total",
                                 "Publishes that copied the cluster because an object other than a pod changed "
                                 "(the rest share it).")
                        .with(obs::LabelValues{})),
      apiConnections(registry.counter("tally_extender_api_connections_total",
                                      "Connections opened to the API server (watches, Binding POSTs), by TLS "
                                      "handshake: full, or resumed from an earlier session.",
                                      {"handshake"})),
      apiConnectionsFull(apiConnections.with({"full"})),
      apiConnectionsResumed(apiConnections.with({"resumed"})),
      prioritizeFromFilter(registry
                               .counter("tally_extender_prioritize_answers_total",
                                        "Prioritize answers by the source of their scores: filter (the scores the "
                                        "same pod's filter gave exactly the candidates it passed, on the snapshot it "
                                        "decided on, kept 1s) or snapshot (scored anew).",
                                        {"source"})
                               .with({"filter"})),
      prioritizeFromSnapshot(
          registry.counter("tally_extender_prioritize_answers_total", "", {"source"}).with({"snapshot"})),
      registry_(registry),
      latency_(registry.histogram("tally_extender_request_duration_seconds",
                                  "Server-side time from the request's header read to response ready, by route.",
                                  obs::exponentialBuckets(0.000025, 2, 18), {"route"})),
      handling_(registry.histogram("tally_extender_request_handling_seconds",
                                   "Server-side time from the whole request read to response ready, by route: "
                                   "request_duration less the wait for a body still arriving.",
                                   obs::exponentialBuckets(0.000025, 2, 18), {"route"})),
      requests_(
          registry.counter("tally_extender_requests_total", "Responses by route and HTTP status.", {"route", "code"})),
      badRequests_(registry.counter("tally_extender_bad_requests_total", "Requests refused before a decision, by kind.",
                                    {"kind"})),
      binds_(registry.counter("tally_extender_binds_total", "Bind verb outcomes.", {"result"})),
      bindPhases_(registry.histogram("tally_extender_bind_phase_seconds",
                                     "Time a bind spent per phase: assume (until its placement is published to the "
                                     "snapshots filter reads) and post (the Binding POST to the API server).",
                                     obs::exponentialBuckets(0.0001, 2, 18), {"phase"})),
      bindAssume_(bindPhases_.with({"assume"})),
      bindPost_(bindPhases_.with({"post"})),
      decisionFamily_(registry.counter("tally_extender_filter_decisions_total",
                                       "Per-node filter decisions by result and the model's reason code.",
                                       {"result", "reason"})) {}

void ExtenderMetrics::response(std::string_view route, int status, double seconds, double handlingSeconds) {
  static_assert(std::size(kVerbRoutes) == std::tuple_size_v<decltype(verbs_)>);
  std::size_t verb = 0;
  while (verb < verbs_.size() && kVerbRoutes[verb] != route) ++verb;
  if (verb == verbs_.size()) {
    latency_.with({route}).observe(seconds);
    handling_.with({route}).observe(handlingSeconds);
    requests_.with({route, std::to_string(status)}).inc();
    return;
  }
  VerbSeries& s = verbs_[verb];
  held(s.latency, [&]() -> obs::Histogram& { return latency_.with({route}); }).observe(seconds);
  held(s.handling, [&]() -> obs::Histogram& { return handling_.with({route}); }).observe(handlingSeconds);
  if (status == 200)
    held(s.ok, [&]() -> obs::Counter& { return requests_.with({route, "200"}); }).inc();
  else
    requests_.with({route, std::to_string(status)}).inc();
}

void ExtenderMetrics::rejected(std::string_view kind) { badRequests_.with({kind}).inc(); }

void ExtenderMetrics::bind(std::string_view result, double assumeSeconds, double postSeconds) {
  binds_.with({result}).inc();
  if (assumeSeconds > 0) bindAssume_.observe(assumeSeconds);
  if (postSeconds > 0) bindPost_.observe(postSeconds);
}

void ExtenderMetrics::decisions(const DecisionTally& tally) {
  const auto& counts = tally.counts;
  for (std::size_t r = 0; r < kFilterResultKinds; ++r) {
    for (std::size_t c = 0; c <= kCodeCount; ++c) {
      if (!counts[r][c]) continue;
      // Series appear on first use so the exposition stays short.
      obs::Counter* counter = decisions_[r][c].load(std::memory_order_acquire);
      if (!counter) {
        std::string reason = c == kCodeCount ? "none" : std::string(model::toString(static_cast<model::Code>(c)));
        counter = &decisionFamily_.with({kResultNames[r], reason});
        decisions_[r][c].store(counter, std::memory_order_release);
      }
      counter->inc(counts[r][c]);
    }
  }
}

}  // namespace tally::extender
