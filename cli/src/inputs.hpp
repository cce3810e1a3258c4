#pragma once
// What every tallyctl command reads: a snapshot file or, live, a LIST of every
// kind from the cluster a kubeconfig names; an optional ledger directory; and
// the clock (the CLI is the shell; the model never reads one). The add-on
// catalogue is the ConfigMap --billing-plans names, as in the extender.

#include <cstdint>
#include <optional>
#include <string>

#include "tally/codec/result.hpp"
#include "tally/codec/snapshot.hpp"

// CLI11 is header-only and costs seconds per translation unit: only the
// files that build flags include it.
namespace CLI {
class App;
}  // namespace CLI

namespace tally::cli {

struct InputOptions {
  std::string snapshotFile;        // empty: live, from `kubeconfig` (else $KUBECONFIG)
  std::string kubeconfig;          // set: live (mutually exclusive with snapshotFile)
  std::string context;             // the kubeconfig's context (default: current)
  bool watchOrganizations = true;  // live: list Organizations (as the binaries' flag)
  bool watchKubevirt = false;      // live: list the KubeVirt CR (as the binaries' flag)
  bool watchDra = true;  // live: list ResourceSlices, ResourceClaims, DeviceTaintRules (as the binaries' flag)
  // The ledger, from the source the controller is configured with: a
  // directory (--ledger-dir) or, live, a ConfigMap (--ledger-configmap
  // namespace/name). Neither: no ledger source is configured, as for a
  // controller without either flag (model/sources.hpp).
  std::string ledgerDirectory;
  std::string ledgerConfigMap;
  std::string now;                                     // RFC 3339; empty: the current time
  std::string billingPlans = "kube-dc/billing-plans";  // namespace/name of the add-on catalogue
  // The controller's --unorganized-gpu-namespaces and --system-namespaces.
  std::string unorganizedGpuNamespaces = "refuse";
  std::string systemNamespaces = "kube-system,kube-public,kube-node-lease,tally-system";
};

// Reads and decodes everything, marks every cache synced at `now` (the ledger
// not configured when no ledger flag is given).
codec::Result<codec::Snapshot> loadInputs(const InputOptions& options);

// --snapshot, --kubeconfig, --context, --watch-organizations, --watch-kubevirt, --watch-dra,
// --ledger-dir (alias --ledger), --ledger-configmap, --now, --billing-plans on a command.
void addInputFlags(CLI::App& command, InputOptions& options);

// Prints "skipped N <Kind>" lines for the kinds a snapshot held but the model does not read.
void printSkipped(const codec::Snapshot& snapshot);

}  // namespace tally::cli
