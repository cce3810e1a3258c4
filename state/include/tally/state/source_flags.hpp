#pragma once
// The flags that say what cluster state a binary reads (the catalogue, the
// optional kinds, the wire format, the ledger, how often snapshots publish),
// spelled and documented once for tally-extender and tally-controller.

#include <chrono>
#include <string>

#include "tally/common/expected.hpp"
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
  bool protobufWatches = true;
  std::string ledgerDir;
  std::string ledgerConfigMap;
  std::string ledgerInterval = "30s";
  std::string publishInterval = "5ms";
};

// --billing-plans, --watch-organizations, --watch-kubevirt, --protobuf-watches,
// --ledger-dir, --ledger-configmap, --ledger-interval, --publish-interval; `readers` ends the
// publish interval's help ("the verbs", "the webhooks").
void addSourceFlags(CLI::App& app, SourceFlags& flags, const std::string& readers);

struct SourceSettings {
  SourceOptions source;
  std::chrono::milliseconds publishInterval{5};
};

// The options the flags describe; an error names the flag and what is wrong
// with its value.
Expected<SourceSettings, std::string> sourceSettings(const SourceFlags& flags);

}  // namespace tally::state
