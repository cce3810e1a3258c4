#include "inputs.hpp"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "live_inputs.hpp"
#include "tally/codec/ledger_directory.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/ledger.hpp"
#include "tally/state/source_flags.hpp"

namespace tally::cli {
namespace {

codec::DecodeError inputError(std::string item, std::string message) {
  codec::DecodeError error;
  error.item = std::move(item);
  error.message = std::move(message);
  return error;
}

codec::Result<codec::Snapshot> loadFile(const InputOptions& options, const codec::BillingPlansLocation& billingPlans) {
  std::ifstream in(options.snapshotFile, std::ios::binary);
  if (!in) return inputError("snapshot " + options.snapshotFile, "cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return inputError("snapshot " + options.snapshotFile, "cannot be read");
  codec::SnapshotOptions snapshotOptions;
  snapshotOptions.billingPlans = billingPlans;
  return codec::loadSnapshot(text.str(), snapshotOptions);
}

// The first entry of $KUBECONFIG, as kubectl reads it.
std::string kubeconfigFromEnvironment() {
  const char* env = std::getenv("KUBECONFIG");
  if (!env) return {};
  std::string list = env;
  return list.substr(0, list.find(':'));
}

codec::Result<codec::Snapshot> loadLive(const InputOptions& options) {
  LiveOptions live;
  live.kubeconfig = options.kubeconfig.empty() ? kubeconfigFromEnvironment() : options.kubeconfig;
  if (live.kubeconfig.empty()) {
    return inputError("input", "give --snapshot FILE, or --kubeconfig FILE (or set $KUBECONFIG) to read live");
  }
  live.context = options.context;
  live.billingPlans = options.billingPlans;
  live.organizations = options.watchOrganizations;
  live.kubevirt = options.watchKubevirt;
  live.dra = options.watchDra;
  if (!options.ledgerConfigMap.empty()) {
    auto location = codec::parseBillingPlansLocation(options.ledgerConfigMap);
    if (!location) return inputError("--ledger-configmap", location.error().message);
    live.ledgerConfigMap = *location;
  }
  return listLive(live);
}

}  // namespace

void addInputFlags(CLI::App& command, InputOptions& options) {
  auto* snapshot = command.add_option("--snapshot", options.snapshotFile,
                                      "Kubernetes List JSON (kubectl get ... -o json); without it, read live");
  auto* kubeconfig = command.add_option(
      "--kubeconfig", options.kubeconfig,
      "Read live: LIST every kind the model reads from this cluster (default: $KUBECONFIG when no --snapshot)");
  snapshot->excludes(kubeconfig);
  command.add_option("--context", options.context, "The kubeconfig context to read live (default: its current one)")
      ->excludes(snapshot);
  command
      .add_flag("--watch-organizations,!--no-watch-organizations", options.watchOrganizations,
                "Live: list kube-dc.com Organizations, as the controller's --watch-organizations")
      ->capture_default_str();
  command
      .add_flag("--watch-kubevirt,!--no-watch-kubevirt", options.watchKubevirt,
                "Live: list the KubeVirt CR's permitted host devices, as the controller's --watch-kubevirt")
      ->capture_default_str();
  command
      .add_flag("--watch-dra,!--no-watch-dra", options.watchDra,
                "Live: list ResourceSlices, ResourceClaims and DeviceTaintRules (DRA pools), as the controller's "
                "--watch-dra")
      ->capture_default_str();
  auto* ledgerDir = command.add_option(
      "--ledger,--ledger-dir", options.ledgerDirectory,
      "Directory of GPUReservationRecord YAML files (the controller's --ledger-dir); without a ledger flag no "
      "ledger is configured, and a pool whose organizations hold a reservation add-on fails LedgerNotConfigured");
  command
      .add_option("--ledger-configmap", options.ledgerConfigMap,
                  "Live: namespace/name of the ConfigMap holding the reservation ledger (the controller's "
                  "--ledger-configmap)")
      ->excludes(ledgerDir)
      ->excludes(snapshot);
  command.add_option("--now", options.now, "Evaluate at this RFC 3339 time (default: now)");
  command
      .add_option("--unorganized-gpu-namespaces", options.unorganizedGpuNamespaces,
                  std::string(state::kUnorganizedGpuNamespacesHelp) + " (as the controller's flag)")
      ->capture_default_str();
  command
      .add_option("--system-namespaces", options.systemNamespaces,
                  std::string(state::kSystemNamespacesHelp) + " (as the controller's flag)")
      ->capture_default_str();
  command
      .add_option("--billing-plans", options.billingPlans,
                  "namespace/name of the ConfigMap whose plans.yaml is the add-on catalogue")
      ->capture_default_str();
}

codec::Result<codec::Snapshot> loadInputs(const InputOptions& options) {
  model::Timestamp now = 0;
  if (options.now.empty()) {
    now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  } else {
    auto parsed = parseRfc3339(options.now);
    if (!parsed) return inputError("--now", "\"" + options.now + "\" is not an RFC 3339 time");
    now = parsed->seconds;
  }

  auto tenancy = state::tenancyPolicy(options.unorganizedGpuNamespaces, options.systemNamespaces);
  if (!tenancy) return inputError("input", tenancy.error());

  auto billingPlans = codec::parseBillingPlansLocation(options.billingPlans);
  if (!billingPlans) return inputError("--billing-plans", billingPlans.error().message);

  auto snapshot = options.snapshotFile.empty() ? loadLive(options) : loadFile(options, *billingPlans);
  if (!snapshot) return std::move(snapshot).error();

  if (!options.ledgerDirectory.empty()) {
    auto ledger = codec::loadLedgerDirectory(options.ledgerDirectory);
    if (!ledger) return std::move(ledger).error();
    snapshot->cluster.ledger = std::move(ledger).value();
  }

  // An offline snapshot is complete by construction: every cache is synced now.
  // The ledger is not in a snapshot: without a ledger flag no ledger source is
  // configured, which is what a controller without one publishes (a pool
  // whose organizations hold a reservation add-on fails closed naming the
  // flags; the others are not affected).
  snapshot->cluster.now = now;
  snapshot->cluster.tenancy = std::move(tenancy).value();
  snapshot->cluster.markAllSynced();
  if (options.ledgerDirectory.empty() && options.ledgerConfigMap.empty()) {
    snapshot->cluster.markNotConfigured(model::Kind::Ledger);
  }
  return snapshot;
}

void printSkipped(const codec::Snapshot& snapshot) {
  for (const auto& [kind, count] : snapshot.skipped) {
    std::cerr << "skipped " << kind << ": " << count << '\n';
  }
}

}  // namespace tally::cli
