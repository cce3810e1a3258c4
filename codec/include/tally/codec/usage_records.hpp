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
// through (the next accrual starts there).
inline constexpr std::string_view kUsageKey = "usage.jsonl";
inline constexpr std::string_view kUsageThroughKey = "through";
struct UsageCheckpoint {
  std::string name;  // the ConfigMap's
  std::string resourceVersion;
  std::optional<model::Timestamp> through;
  std::vector<model::UsageBucket> buckets;
};
// A tally-usage ConfigMap (JSON).
Result<UsageCheckpoint> decodeUsageConfigMap(std::string_view json);
// "tally-usage-YYYYMMDD" of the UTC day `t` falls in.
std::string usageConfigMapName(model::Timestamp t);

}  // namespace tally::codec
