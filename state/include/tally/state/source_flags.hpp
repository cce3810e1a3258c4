#pragma once
// The flags that say what cluster state a binary reads (the catalogue, the
// optional kinds, the wire format, the ledger, how often snapshots publish),
// spelled and documented once for tally-extender and tally-controller.

#include <chrono>
#include <string>

#include "tally/common/expected.hpp"
#include "tally/model/cluster.hpp"
#include "tally/state/kinds.hpp"

// CLI11 is header-only and costs seconds per translation unit: only the
// files that build flags include it.
namespace CLI {
class App;
}  // namespace CLI

namespace tally::state {

struct SourceFlags {
  std::string billingPlans = "kube-dc/billing-plans";
  bool watchOrganizations = true;
  bool watchKubevirt = false;
  bool watchDra = true;
  bool protobufWatches = true;
  std::string ledgerDir;
  std::string ledgerConfigMap;
  std::string ledgerInterval = "30s";
  std::string publishInterval = "5ms";
  std::string unorganizedGpuNamespaces = "refuse";
  std::string systemNamespaces = "kube-system,kube-public,kube-node-lease,tally-system";
};

// --billing-plans, --watch-organizations, --watch-kubevirt, --protobuf-watches,
// --ledger-dir, --ledger-configmap, --ledger-interval, --publish-interval,
// --unorganized-gpu-namespaces, --system-namespaces; `readers` ends the
// publish interval's help ("the verbs", "the webhooks").
void addSourceFlags(CLI::App& app, SourceFlags& flags, const std::string& readers);

struct SourceSettings {
  SourceOptions source;
  std::chrono::milliseconds publishInterval{5};
  model::TenancyPolicy tenancy;
};

// The tenancy policy of --unorganized-gpu-namespaces (refuse|allow) and
// --system-namespaces (a comma-separated list of namespace names), which
// tallyctl spells the same way; an error names the flag and the value.
Expected<model::TenancyPolicy, std::string> tenancyPolicy(const std::string& unorganized,
                                                          const std::string& systemNamespaces);

// The two flags' help, shared with tallyctl.
extern const char* const kUnorganizedGpuNamespacesHelp;
extern const char* const kSystemNamespacesHelp;

// The options the flags describe; an error names the flag and what is wrong
// with its value.
Expected<SourceSettings, std::string> sourceSettings(const SourceFlags& flags);

}  // namespace tally::state
