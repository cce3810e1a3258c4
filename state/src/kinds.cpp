#include "tally/state/kinds.hpp"

#include <string>

#include "tally/model/usage.hpp"

namespace tally::state {

bool enabled(const KindInfo& info, const SourceOptions& options) {
  switch (info.gate) {
    case Gate::Always: return true;
    case Gate::Organizations: return options.organizations;
    case Gate::BillingPlans: return options.billingPlans.has_value();
    case Gate::KubeVirt: return options.kubevirt;
    case Gate::Ledger: return !options.ledgerDir.empty() || options.ledgerConfigMap.has_value();
    case Gate::Dra: return options.dra;
  }
  return false;
}

namespace {

// status.phase!=<each phase in which the model says a pod uses nothing>.
std::string nonTerminalPodSelector() {
  std::string selector;
  for (model::PodPhase phase : model::kTerminalPodPhases) {
    selector += (selector.empty() ? "" : ",") + std::string("status.phase!=") + std::string(model::toString(phase));
  }
  return selector;
}

// One ConfigMap, watched by its name.
void oneConfigMap(ListScope& scope, const codec::BillingPlansLocation& at) {
  scope.resource = runtime::Resource::core("configmaps", at.ns);
  scope.fieldSelector = "metadata.name=" + at.name;
}

}  // namespace

runtime::Resource resourceOf(model::Kind kind) {
  const KindInfo& info = kindInfo(kind);
  return runtime::Resource::of(std::string(info.group), std::string(info.version), std::string(info.resource));
}

ListScope listScope(model::Kind kind, const SourceOptions& options) {
  ListScope scope;
  scope.resource = resourceOf(kind);
  switch (kind) {
    case model::Kind::Pod: scope.fieldSelector = nonTerminalPodSelector(); break;
    case model::Kind::BillingPlans:
      if (options.billingPlans) oneConfigMap(scope, *options.billingPlans);
      break;
    case model::Kind::Ledger:
      if (options.ledgerConfigMap) oneConfigMap(scope, *options.ledgerConfigMap);
      break;
    default: break;
  }
  return scope;
}

std::set<model::Kind> watchedKinds(const SourceOptions& options) {
  std::set<model::Kind> kinds;
  for (const KindInfo& info : kKinds) {
    if (enabled(info, options)) kinds.insert(info.kind);
  }
  return kinds;
}

}  // namespace tally::state
