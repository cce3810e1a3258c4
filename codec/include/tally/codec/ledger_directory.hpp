#pragma once
// Reads the reservation ledger from a directory (a Git checkout): every
// *.yaml / *.yml file below it, one record per file, in path order, so two
// readers of the same checkout see the same ledger. Each file is read by
// addLedgerFile (reservation_record.hpp); this is only the directory I/O.

#include <filesystem>

#include "tally/codec/result.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {

Result<model::Ledger> loadLedgerDirectory(const std::filesystem::path& directory);

}  // namespace tally::codec
