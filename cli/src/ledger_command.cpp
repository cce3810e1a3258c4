#include <iostream>
#include <optional>

#include "commands.hpp"
#include "tally/codec/ledger_directory.hpp"

namespace tally::cli {

int runLedgerValidate(const LedgerValidateOptions& options) {
  auto ledger = codec::loadLedgerDirectory(options.directory);
  if (!ledger) {
    std::cerr << "tallyctl ledger validate: " << ledger.error().describe() << '\n';
    return kExitBadInput;
  }
  std::optional<model::Ledger> previous;
  if (!options.previousDirectory.empty()) {
    auto loaded = codec::loadLedgerDirectory(options.previousDirectory);
    if (!loaded) {
      std::cerr << "tallyctl ledger validate: --previous: " << loaded.error().describe() << '\n';
      return kExitBadInput;
    }
    previous = std::move(loaded).value();
  }

  for (const auto& invalid : ledger->invalid) {
    for (const auto& problem : invalid.problems) {
      std::cout << invalid.source;
      if (!invalid.id.empty()) std::cout << " (" << invalid.id << ")";
      std::cout << ": " << model::toString(problem.code) << ": " << problem.message << '\n';
    }
  }
  const auto problems = model::checkLedgerHistory(*ledger, previous ? &*previous : nullptr);
  for (const auto& problem : problems) {
    std::cout << problem.source << ": " << problem.id << ": " << model::toString(problem.rule) << ": "
              << problem.message << '\n';
  }

  std::cout << ledger->records.size() << " valid record" << (ledger->records.size() == 1 ? "" : "s") << ", "
            << ledger->invalid.size() << " invalid, " << problems.size() << " ledger problem"
            << (problems.size() == 1 ? "" : "s");
  if (previous) std::cout << " against the previous revision";
  std::cout << '\n';
  return ledger->invalid.empty() && problems.empty() ? kExitOk : kExitCheckFailed;
}

}  // namespace tally::cli
