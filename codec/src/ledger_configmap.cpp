#include "tally/codec/ledger_configmap.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "metadata.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/codec/reservation_record.hpp"

namespace tally::codec {

using namespace detail;

Result<model::Ledger> decodeLedgerConfigMap(od::value json, ObjectMeta* out) {
  Metadata meta;
  meta.sink = out;
  std::vector<std::pair<std::string, std::string>> entries;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key == "binaryData") {
      return forEachField(field, key, [&](std::string_view dataKey, od::value) -> Status {
        return fieldError(keyField(dataKey), "a ledger record is text under data, not binaryData");
      });
    }
    if (key != "data") return {};
    return forEachField(field, key, [&](std::string_view dataKey, od::value entry) -> Status {
      auto& [name, text] = entries.emplace_back(std::string(dataKey), std::string());
      return readString(entry, keyField(name), text);
    });
  });
  if (auto done = finished(std::move(status), "ConfigMap", meta); !done) return std::move(done).error();
  std::sort(entries.begin(), entries.end());
  model::Ledger ledger;
  ledger.loaded = true;
  for (const auto& [key, text] : entries) addLedgerFile(ledger, text, key);
  return ledger;
}

Result<model::Ledger> decodeLedgerConfigMapText(std::string_view text) {
  return decodeText<LedgerConfigMapCodec>(text);
}

}  // namespace tally::codec
