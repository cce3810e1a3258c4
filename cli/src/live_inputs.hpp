#pragma once
// tallyctl's live input: one LIST of every kind the model reads, from the API
// server a kubeconfig names, decoded by the codecs the binaries' informers use
// (the kinds of state::kKinds, with the same selectors and optional kinds), into
// the model::Cluster an offline snapshot would give.

#include <optional>
#include <string>

#include "tally/codec/objects.hpp"
#include "tally/codec/result.hpp"
#include "tally/codec/snapshot.hpp"
#include "tally/model/cluster.hpp"

namespace tally::cli {

struct LiveOptions {
  std::string kubeconfig;  // a kubeconfig file (its current context unless `context`)
  std::string context;
  std::string billingPlans = "kube-dc/billing-plans";
  bool organizations = true;  // as the binaries' --watch-organizations
  bool kubevirt = false;      // as the binaries' --watch-kubevirt
  bool dra = true;            // as the binaries' --watch-dra
  // The ConfigMap holding the reservation ledger (the binaries'
  // --ledger-configmap): read into the cluster's ledger; one that does not
  // exist is an error naming it.
  std::optional<codec::BillingPlansLocation> ledgerConfigMap;
};

// Lists every enabled kind (every page); the cluster's clock and caches are left
// to the caller. A kind that cannot be listed is an error naming the resource.
codec::Result<codec::Snapshot> listLive(const LiveOptions& options);

}  // namespace tally::cli
