#include <iostream>

#include "commands.hpp"
#include "tally/codec/ledger_directory.hpp"

namespace tally::cli {

int runLedgerValidate(const std::string& directory) {
  auto ledger = codec::loadLedgerDirectory(directory);
  if (!ledger) {
    std::cerr << "tallyctl ledger validate: " << ledger.error().describe() << '\n';
    return kExitBadInput;
  }
  for (const auto& invalid : ledger->invalid) {
    for (const auto& problem : invalid.problems) {
      std::cout << invalid.source;
      if (!invalid.id.empty()) std::cout << " (" << invalid.id << ")";
      std::cout << ": " << model::toString(problem.code) << ": " << problem.message << '\n';
    }
  }
  std::cout << ledger->records.size() << " valid record" << (ledger->records.size() == 1 ? "" : "s") << ", "
            << ledger->invalid.size() << " invalid\n";
  return ledger->invalid.empty() ? kExitOk : kExitCheckFailed;
}

}  // namespace tally::cli
