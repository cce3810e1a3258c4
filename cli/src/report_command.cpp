#include <iostream>

#include "commands.hpp"
#include "report_output.hpp"
#include "tally/model/report.hpp"

namespace tally::cli {

int runReport(const ReportOptions& options) {
  auto snapshot = loadInputs(options.input);
  if (!snapshot) {
    std::cerr << "tallyctl report: " << snapshot.error().describe() << '\n';
    return kExitBadInput;
  }
  printSkipped(*snapshot);
  const model::Report report = model::buildReport(snapshot->cluster);
  std::cout << (options.output == "table" ? reportTable(report) : reportJson(report));
  return kExitOk;
}

}  // namespace tally::cli
