#pragma once
// Usage records and billing windows as JSON lines: the controller's
// checkpoints (ConfigMaps tally-usage-YYYYMMDD, key usage.jsonl), its /usage
// endpoint and tallyctl usage all write and read this one format.
//
//   {"type":"usage","hour":"2026-12-01T20:00:00Z","kind":"GPUDevice","namespace":"t","name":"dev",
//    "uid":"...","class":"h200","resource":"nvidia.com/...","units":2,"unitSeconds":7200}
//   {"type":"window","id":"gpu-res-1","organization":"acme",...,"from":"...","until":"...","open":true,
//    "deviceSeconds":3600}

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/codec/result.hpp"
#include "tally/model/usage_records.hpp"

namespace tally::codec {

std::string usageLine(const model::UsageBucket& bucket);
std::string windowLine(const model::BillingWindow& window);
// One line per bucket, each ended by a newline.
std::string usageLines(const std::vector<model::UsageBucket>& buckets);
// Lines of usageLine (empty lines skipped; "window" lines refused).
Result<std::vector<model::UsageBucket>> decodeUsageLines(std::string_view text);

// One day's checkpoint: the buckets recorded and the moment they are accrued
// through (the next accrual starts there). A day is one ConfigMap or, when
// its records pass the size of one, several parts: tally-usage-YYYYMMDD (part
// 0), then tally-usage-YYYYMMDD-1, -2, ... Buckets of the parts add up (the
// same hour and holder may be in two parts); only the highest part is
// written, a full one is sealed (data.sealed) before the next is created.
inline constexpr std::string_view kUsageKey = "usage.jsonl";
inline constexpr std::string_view kUsageThroughKey = "through";
inline constexpr std::string_view kUsageSealedKey = "sealed";
// Every part carries these labels: readers list the parts of a range of days
// with one request (the day is an integer YYYYMMDD, so a selector can ask for
// a range with > and <).
inline constexpr std::string_view kUsageLabel = "tally.dev/usage";         // "true"
inline constexpr std::string_view kUsageDayLabel = "tally.dev/usage-day";  // YYYYMMDD
inline constexpr std::string_view kUsagePartLabel = "tally.dev/usage-part";
struct UsageCheckpoint {
  std::string name;  // the ConfigMap's
  std::string resourceVersion;
  model::Timestamp day = 0;  // start of the UTC day, from the name
  int part = 0;              // from the name
  std::optional<model::Timestamp> through;
  bool sealed = false;
  std::size_t bytes = 0;  // of usage.jsonl as stored
  std::vector<model::UsageBucket> buckets;
};
// A tally-usage ConfigMap (JSON). Refused: a name that is no part's name, a
// `through` outside the part's day, a bucket of another day, a bad line.
Result<UsageCheckpoint> decodeUsageConfigMap(std::string_view json);
// A LIST of tally-usage ConfigMaps (JSON): every item, or the first error
// (naming its ConfigMap), and the continue token.
struct UsageCheckpointPage {
  std::vector<UsageCheckpoint> items;
  std::string continueToken;
};
Result<UsageCheckpointPage> decodeUsageConfigMapList(std::string_view json);
// "YYYYMMDD" of the UTC day `t` falls in.
std::string usageDayLabel(model::Timestamp t);
// "tally-usage-YYYYMMDD" of the UTC day `t` falls in; "-N" for part N > 0.
std::string usageConfigMapName(model::Timestamp t, int part = 0);
// The day (its start) and the part a name stands for; none for other names.
struct UsagePartName {
  model::Timestamp day = 0;
  int part = 0;
};
std::optional<UsagePartName> parseUsageConfigMapName(std::string_view name);
// The label selector of every part of the UTC days from `first`'s to `last`'s.
std::string usageDaysSelector(model::Timestamp first, model::Timestamp last);

}  // namespace tally::codec
