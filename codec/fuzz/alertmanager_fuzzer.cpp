// libFuzzer target: arbitrary bytes as Alertmanager's answer to
// GET /api/v2/alerts (the controller's AlertSource, --alertmanager-url: the
// bytes are whatever answers there), read for the default pool label and for
// one a deployment may choose. What is read names a pool, each time; a
// refusal names its reason. Seeds: codec/fuzz/alertmanager-corpus.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/codec/alertmanager_alerts.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(bytes), size);
  for (std::string_view label : {"gpu_pool", "tally.dev/pool"}) {
    auto alerts = tally::codec::parseAlerts(json, label);
    if (!alerts) {
      if (alerts.error().empty()) __builtin_trap();
      continue;
    }
    for (const auto& alert : *alerts) {
      if (alert.pool.empty()) __builtin_trap();  // an alert without the label names no pool: dropped
    }
  }
  return 0;
}
