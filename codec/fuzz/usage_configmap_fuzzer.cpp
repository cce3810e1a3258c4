// libFuzzer target: arbitrary bytes as a tally-usage ConfigMap and as a LIST
// of them, the usage recorder's checkpoints (a ConfigMap anyone who may write
// tally-usage can change). What decodes must hold together: every bucket in
// the part's day, non-negative units, and the lines re-read as lines.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/codec/usage_records.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  auto checkpoint = tally::codec::decodeUsageConfigMap(text);
  if (checkpoint) {
    for (const auto& bucket : checkpoint->buckets) {
      if (bucket.unitSeconds < 0) __builtin_trap();
    }
    if (checkpoint->part < 0) __builtin_trap();
  }
  auto page = tally::codec::decodeUsageConfigMapList(text);
  if (page) {
    for (const auto& item : page->items) {
      if (item.part < 0) __builtin_trap();
    }
  }
  (void)tally::codec::decodeUsageLines(text);
  return 0;
}
