#pragma once
// What every tallyctl command reads: a snapshot file, an optional ledger
// directory, and the clock (the CLI is the shell; the model never reads one).
// The add-on catalogue is the ConfigMap --billing-plans names, as in the extender.

#include <cstdint>
#include <optional>
#include <string>

#include "tally/codec/result.hpp"
#include "tally/codec/snapshot.hpp"

namespace tally::cli {

struct InputOptions {
  std::string snapshotFile;
  std::string ledgerDirectory;                         // empty: no ledger source configured
  std::string now;                                     // RFC 3339; empty: the current time
  std::string billingPlans = "kube-dc/billing-plans";  // namespace/name of the add-on catalogue
};

// Reads and decodes everything, marks every cache synced at `now`.
codec::Result<codec::Snapshot> loadInputs(const InputOptions& options);

// Prints "skipped N <Kind>" lines for the kinds a snapshot held but the model does not read.
void printSkipped(const codec::Snapshot& snapshot);

}  // namespace tally::cli
