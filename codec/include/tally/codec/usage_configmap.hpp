#pragma once
// The tally-usage ConfigMap the usage recorder creates or replaces: one part
// of a day's usage records (codec/usage_records.hpp names its keys and
// labels, and decodeUsageConfigMap reads it back).

#include <optional>
#include <string>

#include "tally/model/usage_records.hpp"

namespace tally::codec {

struct UsagePart {
  std::string ns;
  std::string name;             // usageConfigMapName(day, part)
  std::string resourceVersion;  // set: a replace pinned to it
  model::Timestamp day = 0;
  int part = 0;
  std::optional<model::Timestamp> through;
  bool sealed = false;
  std::string usage;  // usage.jsonl
};

// The ConfigMap as JSON, labelled so that readers select a range of days'
// parts (kUsageLabel, kUsageDayLabel, kUsagePartLabel).
std::string encodeUsageConfigMap(const UsagePart& part);

}  // namespace tally::codec
