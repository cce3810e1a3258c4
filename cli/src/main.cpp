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

  UsageOptions usage;
  auto* usageCommand = app.add_subcommand(
      "usage",
      "GPU unit-seconds per holder (hourly UTC buckets) and reservation billing windows (activatedAt to "
      "releasedAt) of [--since, --until), as JSON lines: from the live cluster's tally-usage-YYYYMMDD ConfigMaps "
      "(the controller's usage recorder; the same lines as its GET /usage), or, with --snapshot, what the "
      "snapshot's holders accrue over the period");
  usageCommand->add_option("--since", usage.since, "Start (RFC 3339, inclusive)")->required();
  usageCommand->add_option("--until", usage.until, "End (RFC 3339, exclusive; default: now)");
  usageCommand->add_option("--snapshot", usage.input.snapshotFile,
                           "Kubernetes List JSON: accrue its holders instead of reading the cluster");
  usageCommand->add_option("--ledger", usage.input.ledgerDirectory,
                           "Directory of GPUReservationRecord YAML files: the billing windows");
  usageCommand->add_option("--now", usage.input.now, "The snapshot's time (RFC 3339; default: now)");
  usageCommand->add_option("--kubeconfig", usage.kubeconfig,
                           "Kubeconfig of the live cluster; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  usageCommand->add_option("--context", usage.context, "Kubeconfig context; empty: the current one");
  usageCommand->add_option("--namespace,-n", usage.ns, "Namespace of the tally-usage-* ConfigMaps")
      ->capture_default_str();

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
  if (*usageCommand) return runUsage(usage);
  return kExitBadInput;
}
