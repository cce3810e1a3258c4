#pragma once
// Reads the reservation ledger from a directory (a Git checkout): every
// *.yaml / *.yml file below it, one record per file, in path order, so two
// readers of the same checkout see the same ledger. Each file is read by
// addLedgerFile (reservation_record.hpp); this is only the directory I/O.
//
// git-sync publishes each revision by swapping a symlink (<root>/<link> -> a
// worktree): the directory named is resolved once per read, so one read sees
// one worktree whole, and the resolved path is part of the signature.

#include <filesystem>
#include <string>

#include "tally/codec/result.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {

Result<model::Ledger> loadLedgerDirectory(const std::filesystem::path& directory);

// What a cheap look at the directory sees, without reading a file: the path
// it resolves to and each record file's relative path, size, modification time
// and inode. An equal signature means there is nothing new to read.
Result<std::string> ledgerDirectorySignature(const std::filesystem::path& directory);

struct LedgerDirectoryRead {
  model::Ledger ledger;
  std::string signature;  // of the files the ledger was read from
};

// Reads the directory and proves it held still while it was read (the
// signature before and after the read are equal). A file being written or a
// symlink swapped mid-read is an error: read again later, never a half
// revision.
Result<LedgerDirectoryRead> readLedgerDirectory(const std::filesystem::path& directory);

}  // namespace tally::codec
