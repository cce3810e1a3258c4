// tallyctl usage: GPU usage records and reservation billing windows as JSON
// lines, the format of the controller's GET /usage (codec/usage_records.hpp).
//  * live (no --snapshot): the tally-usage-YYYYMMDD[-N] ConfigMaps the
//    controller's usage recorder keeps, read through the same function the
//    endpoint uses (state/usage_days.hpp: one LIST by the day label); the billing windows from
//    --ledger when given.
//  * --snapshot: what the holders of the snapshot's moment accrue over
//    [since, until), and the billing windows of its --ledger.
// Open billing windows end at now (the moment of the answer), as the endpoint's do.

#include <chrono>
#include <iostream>

#include "commands.hpp"
#include "tally/codec/ledger_directory.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/usage_records.hpp"
#include "tally/runtime/process.hpp"
#include "tally/state/usage_days.hpp"

namespace tally::cli {

namespace {

std::optional<model::Timestamp> timeOption(const std::string& flag, const std::string& text,
                                           model::Timestamp fallback) {
  if (text.empty()) return fallback;
  auto t = parseRfc3339(text);
  if (!t) {
    std::cerr << flag << ": \"" << text << "\" is not an RFC 3339 time\n";
    return std::nullopt;
  }
  return t->seconds;
}

}  // namespace

int runUsage(const UsageOptions& options) {
  const model::Timestamp now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto since = timeOption("--since", options.since, -1);
  auto until = timeOption("--until", options.until, now);
  if (!since || !until) return kExitBadInput;
  if (*since < 0 || *until <= *since) {
    std::cerr << "--since is required and --until must be after it\n";
    return kExitBadInput;
  }
  if (!options.input.snapshotFile.empty()) {
    auto inputs = loadInputs(options.input);
    if (!inputs) {
      std::cerr << inputs.error().describe() << "\n";
      return kExitBadInput;
    }
    // The snapshot's moment (--now) is the answer's: open windows end there.
    auto at = timeOption("--now", options.input.now, now);
    if (!at) return kExitBadInput;
    const model::Cluster& cluster = inputs->cluster;
    auto buckets = model::accrue(model::holdersAt(cluster), *since, *until);
    std::cout << state::usageExport(buckets, model::billingWindows(cluster.ledger, *since, *until, *at));
    return kExitOk;
  }
  model::Ledger ledger;
  if (!options.input.ledgerDirectory.empty()) {
    auto read = codec::loadLedgerDirectory(options.input.ledgerDirectory);
    if (!read) {
      std::cerr << read.error().describe() << "\n";
      return kExitBadInput;
    }
    ledger = std::move(read).value();
  }
  (void)runtime::process::setUpLogging("error", "text");
  auto client = runtime::process::connect({options.kubeconfig, options.context, "tallyctl/0.1"});
  if (!client) {
    std::cerr << "cannot reach Kubernetes: " << client.error().describe() << "\n";
    return kExitBadInput;
  }
  auto buckets = state::readUsage(**client, options.ns, *since, *until);
  if (!buckets) {
    std::cerr << "cannot read the usage records in " << options.ns << ": " << buckets.error().describe() << "\n";
    return kExitBadInput;
  }
  std::cout << state::usageExport(*buckets, model::billingWindows(ledger, *since, *until, now));
  return kExitOk;
}

}  // namespace tally::cli
