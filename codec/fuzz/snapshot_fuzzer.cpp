// libFuzzer target: any bytes through the snapshot decoder, and every snapshot
// it accepts through the report, must end in a value or an error, never a crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/codec/snapshot.hpp"
#include "tally/model/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto snapshot = tally::codec::loadSnapshot(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!snapshot) {
    (void)snapshot.error().describe();
    return 0;
  }
#ifdef TALLY_FUZZ_REPORT
  snapshot->cluster.now = 1'800'000'000;
  snapshot->cluster.markAllSynced();
  (void)tally::model::buildReport(snapshot->cluster);
#endif
  return 0;
}
