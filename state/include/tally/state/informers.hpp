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
// handed every listed object, and reports sync and staleness by kind.

#include <memory>
#include <thread>
#include <vector>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/writer.hpp"

namespace tally::state {

// Series by kind label (model::toString); each may be null: not exported.
struct InformerMetrics {
  observability::Family<observability::Counter>* events = nullptr;   // events handed to the writer
  observability::Family<observability::Gauge>* staleness = nullptr;  // seconds since the watch was last heard
  observability::Family<observability::Gauge>* synced = nullptr;     // 1 once synced
};

class Informers {
 public:
  Informers(std::shared_ptr<runtime::Client> client, Writer& writer, SourceOptions options,
            InformerMetrics metrics = {});
  ~Informers();
  Informers(const Informers&) = delete;
  Informers& operator=(const Informers&) = delete;

  void start();
  void stop();

  struct Source;
  class LedgerSource;

 private:
  void poll(std::stop_token stop);

  SourceOptions options_;
  Writer& writer_;
  InformerMetrics metrics_;
  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<LedgerSource> ledger_;
  std::jthread poller_;
};

}  // namespace tally::state
