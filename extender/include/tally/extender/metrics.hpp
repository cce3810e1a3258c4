#pragma once
// The extender's metrics (prefix tally_extender_), registered once; hot paths
// hold direct references to their series.

#include <array>
#include <atomic>
#include <string_view>

#include "tally/extender/verbs.hpp"
#include "tally/model/refusal.hpp"
#include "tally/observability/metrics.hpp"

namespace tally::extender {

class ExtenderMetrics {
 public:
  explicit ExtenderMetrics(observability::Registry& registry);

  observability::Registry& registry() { return registry_; }

  void response(std::string_view route, int status, double seconds, double handlingSeconds);
  void rejected(std::string_view kind);  // a bad request, by kind
  void decisions(const DecisionTally& tally);
  // A bind's outcome and where its time went (postSeconds 0: no Binding was posted).
  void bind(std::string_view result, double assumeSeconds = 0, double postSeconds = 0);

  observability::Gauge& snapshotAge;
  observability::Gauge& snapshotGeneration;
  observability::Histogram& publishDuration;
  observability::Gauge& assumedPlacements;
  observability::Counter& assumptionsExpired;
  // Binds for a pod the watch had not delivered, which waited for it:
  // it arrived in time, or the bind was refused as not seen.
  observability::Counter& bindPodArrived;
  observability::Counter& bindPodWaitTimedOut;
  // The binder's adaptive limit on Binding POSTs, and those running (read at
  // each scrape).
  observability::Gauge& bindPostLimit;
  observability::Gauge& bindPostsInFlight;
  observability::Counter& unchangedUpdates;  // watch updates equal to the cached object, dropped
  observability::Counter& clusterCopies;     // publishes that copied the cluster (a non-pod object changed)
  // Connections the API client opened, by TLS handshake (full, resumed).
  observability::Family<observability::Counter>& apiConnections;
  observability::Counter& apiConnectionsFull;
  observability::Counter& apiConnectionsResumed;
  // Prioritize answers by where their scores came from: the filter of the same
  // cycle (same pod, exactly its passed candidates) or the snapshot.
  observability::Counter& prioritizeFromFilter;
  observability::Counter& prioritizeFromSnapshot;
  void prioritizeAnswered(bool fromFilter) { (fromFilter ? prioritizeFromFilter : prioritizeFromSnapshot).inc(); }

 private:
  observability::Registry& registry_;
  observability::Family<observability::Histogram>& latency_;
  observability::Family<observability::Histogram>& handling_;
  observability::Family<observability::Counter>& requests_;
  observability::Family<observability::Counter>& badRequests_;
  observability::Family<observability::Counter>& binds_;
  observability::Family<observability::Histogram>& bindPhases_;
  observability::Histogram& bindAssume_;
  observability::Histogram& bindPost_;
  // Series of the verb routes (filter, prioritize, preempt, bind), kept once
  // first used so a request does not look them up by label: its durations and
  // its responses with status 200. Other routes and statuses look up.
  struct VerbSeries {
    std::atomic<observability::Histogram*> latency{nullptr};
    std::atomic<observability::Histogram*> handling{nullptr};
    std::atomic<observability::Counter*> ok{nullptr};
  };
  std::array<VerbSeries, 4> verbs_{};
  // [result][code]; the last code column is "none".
  observability::Family<observability::Counter>& decisionFamily_;
  std::array<std::array<std::atomic<observability::Counter*>, kCodeCount + 1>, kFilterResultKinds> decisions_{};
};

}  // namespace tally::extender
