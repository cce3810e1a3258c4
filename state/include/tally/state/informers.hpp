#pragma once
// The sources that feed a Writer: one runtime informer per kind the registry
// (kinds.hpp) serves from the API server and the options enable, each
// decoding an event once, with the codec the rest of Tally uses, straight into
// the model's value; and the reservation ledger, polled from its directory
// (re-read only when its listing changed) or watched in its ConfigMap. Each
// revision of the ledger is checked against every record seen before it
// (model::advanceLedgerHistory); a revision that cannot be read whole keeps
// the last one that could, marked with the error (fail closed).
// A poller marks each kind synced once its informer listed and the writer was
// handed every listed object, and reports sync and staleness by kind in the
// registry it is given (kInformerEventsMetric and the two below it).

#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/writer.hpp"

namespace tally::state {

// The series every binary that reads the cluster state exports, by kind
// label (model::toString): one set of names for the controller and the
// extender, apart from the runtime manager's tally_informer_*{resource}.
inline constexpr std::string_view kInformerEventsMetric = "tally_state_informer_events_total";
inline constexpr std::string_view kInformerStalenessMetric = "tally_state_informer_staleness_seconds";
inline constexpr std::string_view kCacheSyncedMetric = "tally_state_cache_synced";

class Informers {
 public:
  // `metrics` null: nothing exported.
  Informers(std::shared_ptr<runtime::Client> client, Writer& writer, SourceOptions options,
            observability::Registry* metrics = nullptr);
  ~Informers();
  Informers(const Informers&) = delete;
  Informers& operator=(const Informers&) = delete;

  void start();
  void stop();

  struct Source;
  class LedgerSource;
  struct Metrics;

 private:
  void poll(std::stop_token stop);

  SourceOptions options_;
  Writer& writer_;
  std::unique_ptr<Metrics> metrics_;  // null: not exported
  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<LedgerSource> ledger_;
  std::jthread poller_;
};

}  // namespace tally::state
