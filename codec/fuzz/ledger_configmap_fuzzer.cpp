// libFuzzer target: any bytes through the ledger ConfigMap decoder, and every
// ledger it accepts through the history check against itself and against the
// empty memory, must end in a value or an error, never a crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/codec/ledger_configmap.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto ledger = tally::codec::decodeLedgerConfigMapText(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!ledger) {
    (void)ledger.error().describe();
    return 0;
  }
  auto first = tally::model::advanceLedgerHistory({}, *ledger);
  auto again = tally::model::advanceLedgerHistory(first.memory, tally::model::Ledger{});
  (void)tally::model::checkLedgerHistory(again.ledger, &first.ledger);
  return 0;
}
