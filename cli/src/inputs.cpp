#include "inputs.hpp"

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tally/codec/ledger_directory.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/ledger.hpp"

namespace tally::cli {
namespace {

codec::DecodeError inputError(std::string item, std::string message) {
  codec::DecodeError error;
  error.item = std::move(item);
  error.message = std::move(message);
  return error;
}

}  // namespace

codec::Result<codec::Snapshot> loadInputs(const InputOptions& options) {
  model::Timestamp now = 0;
  if (options.now.empty()) {
    now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  } else {
    auto parsed = parseRfc3339(options.now);
    if (!parsed) return inputError("--now", "\"" + options.now + "\" is not an RFC 3339 time");
    now = parsed->seconds;
  }

  auto billingPlans = codec::parseBillingPlansLocation(options.billingPlans);
  if (!billingPlans) return inputError("--billing-plans", billingPlans.error().message);

  std::ifstream in(options.snapshotFile, std::ios::binary);
  if (!in) return inputError("snapshot " + options.snapshotFile, "cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return inputError("snapshot " + options.snapshotFile, "cannot be read");

  codec::SnapshotOptions snapshotOptions;
  snapshotOptions.billingPlans = std::move(billingPlans).value();
  auto snapshot = codec::loadSnapshot(text.str(), snapshotOptions);
  if (!snapshot) return std::move(snapshot).error();

  if (!options.ledgerDirectory.empty()) {
    auto ledger = codec::loadLedgerDirectory(options.ledgerDirectory);
    if (!ledger) return std::move(ledger).error();
    snapshot->cluster.ledger = std::move(ledger).value();
  }

  // An offline snapshot is complete by construction: every cache is synced now.
  // The ledger is not in a snapshot: without --ledger its records (pending ones
  // above all) cannot be seen, so it stays unknown and every pool fails closed.
  snapshot->cluster.now = now;
  snapshot->cluster.markAllSynced();
  if (options.ledgerDirectory.empty()) snapshot->cluster.caches[model::Kind::Ledger].synced = false;
  return snapshot;
}

void printSkipped(const codec::Snapshot& snapshot) {
  for (const auto& [kind, count] : snapshot.skipped) {
    std::cerr << "skipped " << kind << ": " << count << '\n';
  }
}

}  // namespace tally::cli
