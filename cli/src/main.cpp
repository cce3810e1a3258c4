// tallyctl: the operator's view of Tally's model, on a snapshot or live.

#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace tally::cli;
  CLI::App app{"tallyctl: GPU capacity, quota and reservations, from a snapshot or live"};
  app.require_subcommand(1);

  ReportOptions report;
  auto* reportCommand =
      app.add_subcommand("report", "Capacity report: every pool's invariant and audit, every GPU node");
  addInputFlags(*reportCommand, report.input);
  reportCommand->add_option("--output,-o", report.output, "json or table")->check(CLI::IsMember({"json", "table"}));

  PlanOptions plan;
  auto* planCommand = app.add_subcommand("plan", "Evaluate the invariant after a proposed change, before making it");
  addInputFlags(*planCommand, plan.input);
  planCommand->add_option("--record", plan.recordFile, "A new GPUReservationRecord YAML file");
  planCommand->add_option("--addon", plan.addon, "An add-on quantity change: <organization>/<add-on>=<quantity>");
  planCommand->add_option("--node-mode", plan.nodeMode, "A node mode change: <node>=<mode>");
  planCommand->add_option("--output,-o", plan.output, "text or json")->check(CLI::IsMember({"text", "json"}));

  OptionsOptions options;
  auto* optionsCommand = app.add_subcommand(
      "options", "The GPU catalogue of a namespace: each class, whether it can be ordered now and the largest count");
  addInputFlags(*optionsCommand, options.input);
  optionsCommand->add_option("--namespace,-n", options.ns, "The tenant namespace the GPUDevice would be created in")
      ->required();
  optionsCommand->add_option("--output,-o", options.output, "table or json")->check(CLI::IsMember({"table", "json"}));

  AuditCommandOptions audit;
  auto* auditCommand =
      app.add_subcommand("audit", "Every pool's audit findings and what clears each; exits 1 when a pool fails");
  addInputFlags(*auditCommand, audit.input);
  auditCommand->add_option("--output,-o", audit.output, "text or json")->check(CLI::IsMember({"text", "json"}));

  LedgerValidateOptions validate;
  auto* ledgerCommand = app.add_subcommand("ledger", "Reservation ledger tools");
  ledgerCommand->require_subcommand(1);
  auto* validateCommand = ledgerCommand->add_subcommand(
      "validate", "Validate every record of a ledger directory, and its change from the previous revision");
  validateCommand->add_option("directory", validate.directory, "Directory of GPUReservationRecord YAML files")
      ->required();
  validateCommand->add_option("--previous", validate.previousDirectory,
                              "The same ledger at its previous revision: every record may change only along the "
                              "state machine, and none may disappear");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }

  if (*reportCommand) return runReport(report);
  if (*validateCommand) return runLedgerValidate(validate);
  if (*planCommand) return runPlan(plan);
  if (*optionsCommand) return runOptions(options);
  if (*auditCommand) return runAudit(audit);
  return kExitBadInput;
}
