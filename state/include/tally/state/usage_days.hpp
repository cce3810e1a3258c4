#pragma once
// The usage records as the controller's usage recorder stores them, read
// back: the tally-usage-YYYYMMDD[-N] ConfigMaps of a range of UTC days, listed
// by their day label (codec/usage_records.hpp decodes each part) and
// assembled into days. The recorder reads where its record stands through
// it, GET /usage and tallyctl usage read the buckets of a period through it;
// only the recorder writes (controller/usage_recorder.hpp).

#include <optional>
#include <string>
#include <vector>

#include "tally/codec/usage_records.hpp"
#include "tally/model/ledger.hpp"
#include "tally/model/usage_records.hpp"
#include "tally/runtime/client.hpp"

namespace tally::state {

// One UTC day of usage records as read back: its parts, in part order.
struct UsageDay {
  model::Timestamp day = 0;
  std::vector<codec::UsageCheckpoint> parts;
  // How far the day is accrued: the latest `through` of its parts (only the
  // highest part moves it; a sealed part keeps the one it had).
  std::optional<model::Timestamp> through() const;
  // The buckets of every part, summed (the same hour and holder may be in two).
  std::vector<model::UsageBucket> buckets() const;
};

// The parts of the days [first, last] (their starts) into days, sorted; parts
// of other days (a selector is only a filter on the server) are dropped.
std::vector<UsageDay> assembleUsageDays(std::vector<codec::UsageCheckpoint> parts, model::Timestamp first,
                                        model::Timestamp last);

// The buckets of the days read whose hour starts in [since, until) (days
// outside the period, and hours before since inside its first day, dropped).
std::vector<model::UsageBucket> usageIn(const std::vector<UsageDay>& days, model::Timestamp since,
                                        model::Timestamp until);

// JSON lines: usage lines, then billing-window lines (what GET /usage and
// tallyctl usage print).
std::string usageExport(const std::vector<model::UsageBucket>& buckets,
                        const std::vector<model::BillingWindow>& windows);

// Every part of the UTC days from `first`'s to `last`'s in `ns`, with one
// LIST by the day label (paged), assembled into days. A part that does not
// decode is an error naming it.
runtime::Result<std::vector<UsageDay>> readUsageDays(runtime::Client& client, const std::string& ns,
                                                     model::Timestamp first, model::Timestamp last);

// The buckets recorded in `ns` whose hour is in [since, until).
runtime::Result<std::vector<model::UsageBucket>> readUsage(runtime::Client& client, const std::string& ns,
                                                           model::Timestamp since, model::Timestamp until);

}  // namespace tally::state
