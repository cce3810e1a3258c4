#include "tally/state/source_flags.hpp"

#include <CLI/CLI.hpp>

#include "tally/runtime/process.hpp"

namespace tally::state {

void addSourceFlags(CLI::App& app, SourceFlags& f, const std::string& readers) {
  app.add_option("--billing-plans", f.billingPlans,
                 "namespace/name of the billing-plans ConfigMap (key plans.yaml); empty: do not watch it")
      ->capture_default_str();
  app.add_option("--watch-organizations", f.watchOrganizations,
                 "Watch Organizations (kube-dc.com/v1): needed to hold idle reservations of other organizations")
      ->capture_default_str();
  app.add_option("--watch-kubevirt", f.watchKubevirt, "Watch the KubeVirt CR (permittedHostDevices)")
      ->capture_default_str();
  app.add_option("--protobuf-watches", f.protobufWatches,
                 "List and watch nodes, pods, namespaces and resource quotas as protobuf (cheaper for the API server "
                 "to encode); false: JSON")
      ->capture_default_str();
  app.add_option("--ledger-dir", f.ledgerDir,
                 "Reservation ledger directory: a git-sync checkout, the path of its symlink (followed on every read; "
                 "each *.yaml/*.yml file below it one record). Empty (and no --ledger-configmap): no ledger");
  app.add_option("--ledger-configmap", f.ledgerConfigMap,
                 "namespace/name of a ConfigMap holding the reservation ledger instead of --ledger-dir (each data key "
                 "one record, named by its key), watched");
  app.add_option("--ledger-interval", f.ledgerInterval,
                 "How often --ledger-dir is looked at; its files are re-read only when the listing (paths, sizes, "
                 "modification times, the symlink's target) changed")
      ->capture_default_str();
  app.add_option("--publish-interval", f.publishInterval,
                 "Longest delay between a watch event and the snapshot " + readers + " decide on (batching)")
      ->capture_default_str();
}

Expected<SourceSettings, std::string> sourceSettings(const SourceFlags& f) {
  SourceSettings s;
  if (f.billingPlans.empty()) {
    s.source.billingPlans.reset();
  } else {
    auto parsed = codec::parseBillingPlansLocation(f.billingPlans);
    if (!parsed) return "--billing-plans: " + parsed.error().message;
    s.source.billingPlans = std::move(parsed).value();
  }
  s.source.organizations = f.watchOrganizations;
  s.source.kubevirt = f.watchKubevirt;
  s.source.protobuf = f.protobufWatches;
  if (!f.ledgerDir.empty() && !f.ledgerConfigMap.empty()) {
    return std::string("--ledger-dir and --ledger-configmap both set: the ledger has one source, give one of them");
  }
  s.source.ledgerDir = f.ledgerDir;
  if (!f.ledgerConfigMap.empty()) {
    auto parsed = codec::parseBillingPlansLocation(f.ledgerConfigMap);
    if (!parsed) return "--ledger-configmap: " + parsed.error().message;
    s.source.ledgerConfigMap = std::move(parsed).value();
  }
  auto ledgerInterval = runtime::process::parseDuration(f.ledgerInterval);
  if (!ledgerInterval) return "--ledger-interval: " + ledgerInterval.error().message;
  s.source.ledgerInterval = *ledgerInterval;
  auto publish = runtime::process::parseDuration(f.publishInterval);
  if (!publish) return "--publish-interval: " + publish.error().message;
  s.publishInterval = *publish;
  return s;
}

}  // namespace tally::state
