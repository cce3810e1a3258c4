#pragma once
// The usage recorder (leader-only): accrues GPU unit-seconds per holder
// (model::holdersAt, model::accrue) every --usage-interval and whenever the
// holders change, into hourly (UTC) buckets kept per UTC day in the
// controller's namespace: tally-usage-YYYYMMDD, and when a day's records pass
// kMaxUsageBytes, further parts tally-usage-YYYYMMDD-1, -2, ... each labelled
// with its day (codec/usage_records.hpp). The decisions are usage_plan.hpp's;
// the records are read back through state/usage_days.hpp.
//
// Restart-safe: every flush reads today's parts with one LIST (a label
// selector on the day; the lookback window's when today has no `through` yet)
// and makes one write per step: an update of the day's highest part, pinned
// to its resourceVersion, that adds the buckets of [through, now) and moves
// data.through to now in the same write; or, when that part is full, its seal
// (pinned; data unchanged) and then the create of the next part with the
// buckets and the new `through`. A new leader (or a restarted one) continues
// from the last `through` it finds, so the gap between the old leader's last
// flush and its own first one is accrued once, with the holders it sees then.
// A 409 (or a create that finds the part existing) re-reads and starts from
// the `through` it finds: nothing is added twice. Stored data that does not
// decode fails the flush naming the ConfigMap, `through` unmoved: nothing is
// dropped or overwritten.

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
#include "tally/controller/catalog_endpoint.hpp"
#include "tally/controller/usage_plan.hpp"
#include "tally/model/usage_records.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/state/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

struct UsageRecorderOptions {
  std::string ns;                                  // where the tally-usage-* ConfigMaps live
  std::chrono::milliseconds interval{60'000};      // longest time between flushes
  std::chrono::milliseconds checkInterval{5'000};  // how often the holders are compared
  int lookbackDays = 7;                            // how far back a new leader looks for `through`
  int maxConflicts = 8;                            // re-reads on 409 before the flush is retried later
  std::size_t maxBytes = kMaxUsageBytes;           // usage.jsonl per part
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

  // The usage lines and the reservations' billing windows of the period,
  // open windows ended at `now`: what GET /usage answers (JSON lines, usage first).
  runtime::Result<std::string> exportLines(const UsagePeriod& period, const model::Ledger& ledger,
                                           model::Timestamp now) const;
  model::Timestamp now() const;

 private:
  struct Metrics;
  runtime::Status flush(model::Timestamp now, const std::vector<model::Holder>& current);
  std::vector<model::Holder> currentHolders();

  std::shared_ptr<runtime::Client> client_;
  state::Writer& writer_;
  UsageRecorderOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::mutex mu_;   // one tick at a time
  UsageTerm term_;  // what this leadership term last flushed
  model::Timestamp lastFlush_ = 0;
};

// What a caller of GET /usage must be allowed: get on the non-resource URL
// /usage (RBAC: nonResourceURLs ["/usage"], verbs ["get"]). Every tenant's
// billing data is in the answer, so there is no per-namespace grant.
AccessRule usageAccessRule();

struct UsageRouteOptions {
  // TokenReview + SubjectAccessReview of the bearer token (usageAccessRule).
  AccessReviewer* reviewer = nullptr;
  // Where a request's review and answer run (both call the API server: off
  // the ops thread, which answers the probes). Unset: inline.
  std::function<void(std::function<void()>)> run;
};

// GET /usage?since=RFC3339&until=RFC3339 (until defaults to now): the
// recorded usage and the billing windows of the snapshot's ledger (open ones
// ended at the moment of the answer), as JSON lines (application/x-ndjson).
// 401 without a valid bearer token, 403 for a user who may not get /usage,
// 400 on a bad time, 503 when the caller or the checkpoints cannot be read.
void addUsageRoute(runtime::http::Router& router, const UsageRecorder& recorder,
                   const SnapshotCell<state::Snapshot>& snapshots, UsageRouteOptions options);

// One exchange of GET /usage, for tests.
runtime::http::Response answerUsage(const UsageRecorder& recorder, const SnapshotCell<state::Snapshot>& snapshots,
                                    AccessReviewer& reviewer, std::optional<std::string_view> since,
                                    std::optional<std::string_view> until, std::string_view authorization);

}  // namespace tally::controller
