#pragma once
// GPUReservationRecord YAML (the format of seed 000) into the model's
// ReservationRecord values. Reading the wire format is this file's; the rules a
// record must satisfy (model::validateRecord, model::findForbiddenContent) and
// the state machine are the model's.

#include <string_view>

#include "tally/common/expected.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {

// What decoding one document gives: the record, or the reasons it is not one
// (naming the source, and the id and pool when it could be read that far).
using RecordResult = Expected<model::ReservationRecord, model::InvalidRecord>;

// Reads one YAML document and validates it (schema, times, state-dependent
// fields, forbidden content). Never throws; `source` names the file in every
// problem.
RecordResult decodeReservationRecord(std::string_view yaml, std::string_view source);

// Adds the records of one file (one or more YAML documents) to a ledger: the
// valid ones to `records`, the others to `invalid`. A file of several documents
// names each one "source#index".
void addLedgerFile(model::Ledger& ledger, std::string_view yaml, std::string_view source);

}  // namespace tally::codec
