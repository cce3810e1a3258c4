#pragma once
// The usage recorder's decisions, free of I/O: where the stored record stands
// (the days read back, state/usage_days.hpp), the next write of a flush, and
// what GET /usage answers of the days read. The recorder
// (usage_recorder.hpp) reads, asks, writes; its unit test asks without a
// server.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/codec/usage_records.hpp"
#include "tally/model/ledger.hpp"
#include "tally/model/usage_records.hpp"
#include "tally/state/usage_days.hpp"

namespace tally::controller {

// Under Kubernetes' 1 MiB object limit, with room for the object's metadata:
// the most usage.jsonl one part holds.
inline constexpr std::size_t kMaxUsageBytes = 900 * 1024;

// What this leadership term last flushed: through when, with which holders.
struct UsageTerm {
  std::optional<model::Timestamp> through;
  std::vector<model::Holder> holders;
};

// The next write of a flush.
struct UsageWrite {
  enum class Action {
    kNone,      // the record is ahead of the clock: nothing to add yet
    kCreate,    // a new part (the day's first, or the one after a sealed part)
    kUpdate,    // the highest part gains `added` and moves `through`, pinned to its resourceVersion
    kSeal,      // the highest part is full: marked sealed (data unchanged), pinned; the next write creates
    kTooLarge,  // even one hour of the holders passes a part's size: nothing written
  };
  Action action = Action::kNone;
  std::string name;             // the part's ConfigMap
  model::Timestamp day = 0;     // its day
  int part = 0;                 // its part
  std::string resourceVersion;  // kUpdate, kSeal: the one read
  model::Timestamp from = 0;    // the accrual of this write: [from, until)
  model::Timestamp until = 0;
  std::vector<model::Holder> held;          // the holders of [from, until)
  std::vector<model::UsageBucket> added;    // what [from, until) adds (none for kSeal)
  std::optional<model::Timestamp> through;  // the part's `through` after the write
  bool sealed = false;
  std::string usage;  // the part's usage.jsonl after the write
  std::string error;  // kTooLarge: what did not fit, naming the ConfigMap, its size and the limit
};

// The next write, given the days read back (the lookback window up to today),
// the clock, the term's last flush and the holders seen now. The record
// continues from the latest `through` it finds; the holders of [through, now)
// are the term's when it flushed that `through` itself, else those seen now (a
// new leader accrues the gap once, with the holders it sees). A write ends at
// its day's end (an older day is closed first) and, when a whole period's
// buckets would not fit in one part, at its hour's end; the next write goes on
// from there.
UsageWrite planUsageWrite(const std::vector<state::UsageDay>& days, model::Timestamp now, const UsageTerm& term,
                          const std::vector<model::Holder>& current, std::size_t maxBytes = kMaxUsageBytes);

// The term once `write` succeeded: through its `until`, with the holders of
// what comes next (those it wrote with when it stopped short of now, at a
// day's or an hour's end; those seen now otherwise). A seal moves nothing.
UsageTerm termAfter(const UsageWrite& write, const UsageTerm& before, model::Timestamp now,
                    const std::vector<model::Holder>& current);
// Whether the flush is done once `write` succeeded (else it goes on from the record it left).
bool flushDone(const UsageWrite& write, model::Timestamp now);

// The ConfigMap a write creates or replaces (JSON), with the labels readers
// select the parts of a range of days by (codec::kUsageDayLabel).
std::string usageConfigMapBody(const std::string& ns, const UsageWrite& write);

// A /usage period: since required, until defaulting to now, both RFC 3339,
// until after since; none when the query is not one.
struct UsagePeriod {
  model::Timestamp since = 0;
  model::Timestamp until = 0;
};
std::optional<UsagePeriod> parseUsagePeriod(std::optional<std::string_view> since,
                                            std::optional<std::string_view> until, model::Timestamp now);

// What GET /usage answers of the days read: the period's buckets, then the
// ledger's billing windows over the period, ended at `now` at the latest.
std::string usageAnswer(const std::vector<state::UsageDay>& days, const UsagePeriod& period,
                        const model::Ledger& ledger, model::Timestamp now);

}  // namespace tally::controller
