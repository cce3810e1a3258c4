#pragma once
// The usage recorder (leader-only): accrues GPU unit-seconds per holder
// (model::holdersAt, model::accrue) every --usage-interval and whenever the
// holders change, into hourly (UTC) buckets kept in one ConfigMap per UTC day,
// tally-usage-YYYYMMDD in the controller's namespace (codec/usage_records.hpp).
//
// Restart-safe: every flush is one read-modify-write of the day's ConfigMap,
// pinned to its resourceVersion, that adds the buckets of [through, now) and
// moves data.through to now in the same write. A new leader (or a restarted
// one) continues from the last `through` it finds (today's ConfigMap, else the
// latest of the --usage-lookback-days before), so the gap between the old
// leader's last flush and its own first one is accrued once, with the holders
// it sees then. A 409 re-reads and starts from the `through` it finds: nothing
// is added twice. A flush that would make the ConfigMap larger than
// kMaxUsageBytes fails (result "too_large", an error log) without moving
// `through`: nothing is dropped, and nothing is recorded until an operator acts.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "tally/codec/usage_records.hpp"
#include "tally/common/snapshot_cell.hpp"
#include "tally/model/usage_records.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/state/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

// Under Kubernetes' 1 MiB object limit, with room for the object's metadata.
inline constexpr std::size_t kMaxUsageBytes = 900 * 1024;

struct UsageRecorderOptions {
  std::string ns;                                  // where the tally-usage-* ConfigMaps live
  std::chrono::milliseconds interval{60'000};      // longest time between flushes
  std::chrono::milliseconds checkInterval{5'000};  // how often the holders are compared
  int lookbackDays = 7;                            // how far back a new leader looks for `through`
  int maxConflicts = 8;                            // re-reads on 409 before the flush is retried later
  std::function<model::Timestamp()> clock;         // seconds; default: the system clock
  observability::Registry* metrics = nullptr;
};

class UsageRecorder {
 public:
  UsageRecorder(std::shared_ptr<runtime::Client> client, state::Writer& writer, UsageRecorderOptions options);
  ~UsageRecorder();
  UsageRecorder(const UsageRecorder&) = delete;
  UsageRecorder& operator=(const UsageRecorder&) = delete;

  // Joins the manager as a leader-only controller of one key.
  void attach(runtime::Manager& manager);

  // One check: flushes when the holders changed or the interval passed. Runs
  // on the controller's worker (tests call it directly).
  runtime::Status tick(bool force = false);

  // The usage lines and the reservations' billing windows of [since, until):
  // what GET /usage answers (JSON lines, usage first).
  runtime::Result<std::string> exportLines(model::Timestamp since, model::Timestamp until,
                                           const model::Ledger& ledger) const;

 private:
  struct Metrics;
  runtime::Status flush(model::Timestamp now, const std::vector<model::Holder>& current);
  std::vector<model::Holder> currentHolders();
  model::Timestamp now() const;

  std::shared_ptr<runtime::Client> client_;
  state::Writer& writer_;
  UsageRecorderOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::mutex mu_;  // one tick at a time
  // What this leadership term last flushed: through when, with which holders.
  std::optional<model::Timestamp> through_;
  std::vector<model::Holder> holders_;
  model::Timestamp lastFlush_ = 0;
};

// The buckets recorded in the tally-usage-* ConfigMaps of `ns` whose hour is
// in [since, until). The controller's export and tallyctl usage read through it.
runtime::Result<std::vector<model::UsageBucket>> readUsage(runtime::Client& client, const std::string& ns,
                                                           model::Timestamp since, model::Timestamp until);

// GET /usage?since=RFC3339&until=RFC3339 (until defaults to now): the
// recorded usage and the billing windows of the snapshot's ledger, as JSON
// lines (application/x-ndjson). 400 on a bad time, 503 when the checkpoints
// cannot be read.
void addUsageRoute(runtime::http::Router& router, const UsageRecorder& recorder,
                   const SnapshotCell<state::Snapshot>& snapshots);

// JSON lines: usage lines, then billing-window lines.
std::string usageExport(const std::vector<model::UsageBucket>& buckets,
                        const std::vector<model::BillingWindow>& windows);

}  // namespace tally::controller
