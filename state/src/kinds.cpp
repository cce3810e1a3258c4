#include "tally/state/kinds.hpp"

namespace tally::state {

bool enabled(const KindInfo& info, const SourceOptions& options) {
  switch (info.gate) {
    case Gate::Always: return true;
    case Gate::Organizations: return options.organizations;
    case Gate::BillingPlans: return options.billingPlans.has_value();
    case Gate::KubeVirt: return options.kubevirt;
    case Gate::Ledger: return !options.ledgerDir.empty() || options.ledgerConfigMap.has_value();
  }
  return false;
}

std::set<model::Kind> watchedKinds(const SourceOptions& options) {
  std::set<model::Kind> kinds;
  for (const KindInfo& info : kKinds) {
    if (enabled(info, options)) kinds.insert(info.kind);
  }
  return kinds;
}

}  // namespace tally::state
