#pragma once
// The reservation ledger kept in one ConfigMap (tally-controller
// --ledger-configmap): each data key is one record file, named by its key, in
// key order. Each value is read by addLedgerFile (reservation_record.hpp), so a
// key holds what a file of the ledger directory holds.

#include <simdjson.h>

#include <string_view>

#include "tally/codec/objects.hpp"
#include "tally/codec/result.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {

// A ConfigMap (JSON) into the ledger of its data. A ConfigMap without data is
// an empty ledger; binaryData is refused (records are reviewed text).
Result<model::Ledger> decodeLedgerConfigMap(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);

// The same from the object's text (the fuzz target's and tallyctl's door).
Result<model::Ledger> decodeLedgerConfigMapText(std::string_view json);

// The informers' codec shape (codecs.hpp) for the ledger ConfigMap.
struct LedgerConfigMapCodec {
  using Object = model::Ledger;
  static constexpr std::string_view kKind = "ConfigMap";
  static Result<Object> fromJson(simdjson::ondemand::value json, ObjectMeta* meta = nullptr) {
    return decodeLedgerConfigMap(json, meta);
  }
};

}  // namespace tally::codec
