// tallyctl: the operator's view of Tally's model, offline.

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace tally::cli;
  CLI::App app{"tallyctl: GPU capacity, quota and reservations, from a snapshot"};
  app.require_subcommand(1);

  ReportOptions report;
  auto* reportCommand = app.add_subcommand("report", "Capacity report: every pool's invariant and audit, every GPU node");
  reportCommand->add_option("--snapshot", report.input.snapshotFile, "Kubernetes List JSON (kubectl get ... -o json)")
      ->required();
  reportCommand->add_option("--ledger", report.input.ledgerDirectory, "Directory of GPUReservationRecord YAML files");
  reportCommand->add_option("--output,-o", report.output, "json or table")
      ->check(CLI::IsMember({"json", "table"}));
  reportCommand->add_option("--now", report.input.now, "Evaluate at this RFC 3339 time (default: now)");

  std::string ledgerDirectory;
  auto* ledgerCommand = app.add_subcommand("ledger", "Reservation ledger tools");
  ledgerCommand->require_subcommand(1);
  auto* validateCommand = ledgerCommand->add_subcommand("validate", "Validate every record of a ledger directory");
  validateCommand->add_option("directory", ledgerDirectory, "Directory of GPUReservationRecord YAML files")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }

  if (*reportCommand) return runReport(report);
  if (*validateCommand) return runLedgerValidate(ledgerDirectory);
  return kExitBadInput;
}
