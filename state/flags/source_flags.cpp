#include "tally/state/source_flags.hpp"

#include <CLI/CLI.hpp>

#include <cctype>

#include "tally/runtime/process.hpp"

namespace tally::state {

const char* const kUnorganizedGpuNamespacesHelp =
    "GPU use in a namespace no Organization holds (neither it nor an ancestor): refuse (the doors refuse it "
    "NamespaceUnorganized and the audit finds it, UnorganizedGpuUse) or allow";
const char* const kSystemNamespacesHelp =
    "Comma-separated namespaces whose GPU use is the platform's own, outside the rule of "
    "--unorganized-gpu-namespaces";

Expected<model::TenancyPolicy, std::string> tenancyPolicy(const std::string& unorganized,
                                                          const std::string& systemNamespaces) {
  model::TenancyPolicy policy;
  if (unorganized == "refuse") {
    policy.unorganized = model::UnorganizedGpuPolicy::Refuse;
  } else if (unorganized == "allow") {
    policy.unorganized = model::UnorganizedGpuPolicy::Allow;
  } else {
    return "--unorganized-gpu-namespaces: \"" + unorganized + "\" is neither refuse nor allow";
  }
  policy.systemNamespaces.clear();
  std::string_view rest = systemNamespaces;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    // A DNS-1123 label, as every namespace name is.
    bool valid = item.size() <= 63 && std::isalnum(static_cast<unsigned char>(item.front())) &&
                 std::isalnum(static_cast<unsigned char>(item.back()));
    for (char c : item) valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
    if (!valid) return "--system-namespaces: \"" + std::string(item) + "\" is not a namespace name";
    policy.systemNamespaces.emplace(item);
  }
  return policy;
}

void addSourceFlags(CLI::App& app, SourceFlags& f, const std::string& readers) {
  app.add_option("--billing-plans", f.billingPlans,
                 "namespace/name of the billing-plans ConfigMap (key plans.yaml); empty: do not watch it")
      ->capture_default_str();
  app.add_option("--watch-organizations", f.watchOrganizations,
                 "Watch Organizations (kube-dc.com/v1): needed to hold idle reservations of other organizations")
      ->capture_default_str();
  app.add_option("--watch-kubevirt", f.watchKubevirt, "Watch the KubeVirt CR (permittedHostDevices)")
      ->capture_default_str();
  app.add_option("--watch-dra", f.watchDra,
                 "Watch ResourceSlices, ResourceClaims and DeviceTaintRules (resource.k8s.io/v1): GPUDeviceClasses "
                 "with spec.dra count them; false on an API server without DRA (such classes then serve nothing)")
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
  app.add_option("--unorganized-gpu-namespaces", f.unorganizedGpuNamespaces, kUnorganizedGpuNamespacesHelp)
      ->capture_default_str();
  app.add_option("--system-namespaces", f.systemNamespaces, kSystemNamespacesHelp)->capture_default_str();
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
  s.source.dra = f.watchDra;
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
  auto tenancy = tenancyPolicy(f.unorganizedGpuNamespaces, f.systemNamespaces);
  if (!tenancy) return tenancy.error();
  s.tenancy = std::move(tenancy).value();
  if (!f.watchOrganizations && s.tenancy.unorganized == model::UnorganizedGpuPolicy::Refuse) {
    return std::string(
        "--watch-organizations=false with --unorganized-gpu-namespaces=refuse would refuse every GPU order outside "
        "--system-namespaces (no namespace is seen under an Organization): watch Organizations, or pass "
        "--unorganized-gpu-namespaces=allow");
  }
  return s;
}

}  // namespace tally::state
