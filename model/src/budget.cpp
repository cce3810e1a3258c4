#include "tally/model/budget.hpp"

#include <fmt/format.h>

#include "tally/model/tenancy.hpp"
#include "lookup.hpp"

namespace tally::model {

using detail::chainOf;
using detail::namespacedRange;

TotalsUsageReader::TotalsUsageReader(const Cluster& cluster, const UsageTotals& totals) : totals_(totals) {
  for (const auto& [ns, used] : totals.namespaceUsed) {
    for (const auto& ancestor : chainOf(cluster, ns)) {
      for (const auto& [key, amount] : used) subtree_[ancestor].add(key, amount);
    }
  }
}

std::int64_t TotalsUsageReader::subtreeUsed(std::string_view ns, std::string_view key) const {
  auto it = subtree_.find(std::string(ns));
  return it == subtree_.end() ? 0 : it->second.get(key);
}

std::int64_t TotalsUsageReader::namespaceUsed(std::string_view ns, std::string_view key) const {
  auto it = totals_.namespaceUsed.find(std::string(ns));
  return it == totals_.namespaceUsed.end() ? 0 : it->second.get(key);
}

namespace {

std::string usageText(std::int64_t used, const BudgetAsk& ask, std::int64_t hard) {
  if (ask.amount == 0 && ask.included > 0) {
    return fmt::format("{} in use, this pod's {} included, limit {}", used, ask.included, hard);
  }
  return fmt::format("{} in use + {} requested = {}, limit {}", used, ask.amount, used + ask.amount, hard);
}

}  // namespace

std::optional<Refusal> checkBudget(const Cluster& cluster, const UsageReader& usage, std::string_view ns,
                                   const BudgetAsk& ask) {
  const std::string_view key = ask.key;
  for (Kind kind : {Kind::Namespace, Kind::HierarchicalResourceQuota, Kind::ResourceQuota}) {
    if (!cluster.synced(kind)) {
      return Refusal{
          Code::BudgetUnknown,
          fmt::format("budget of namespace {} for {} is unknown: the {} cache is not synced", ns, key, toString(kind))};
    }
  }
  if (!cluster.namespaces.contains(std::string(ns))) {
    return Refusal{Code::NamespaceUnknown,
                   fmt::format("budget of namespace {} for {} is unknown: the namespace is not in the namespace cache, "
                               "so its ancestors' quotas cannot be read",
                               ns, key)};
  }
  for (const auto& scope : chainOf(cluster, ns)) {
    auto [first, last] = namespacedRange(cluster.hrqs, scope);
    for (auto it = first; it != last; ++it) {
      const auto& hrq = it->second;
      if (!hrq.hard.contains(key)) {
        // HNC limits nothing plan-quota does not name: the organization's use
        // of the pool would be bounded by no quota and counted in no term of
        // its invariant (the quota controller writes every GPU key, 0 when
        // nothing grants it).
        auto [org, orgEnd] = namespacedRange(cluster.organizations, scope);
        if (hrq.name == kOrgQuotaName && org != orgEnd) {
          return Refusal{Code::BudgetUnknown,
                         fmt::format("budget of namespace {} for {} is unknown: hierarchicalresourcequota {}/{} of "
                                     "organization {} names no quota for it (the quota controller has not written "
                                     "it yet), so its use would be counted in no term of the pool's invariant",
                                     ns, key, hrq.ns, hrq.name, org->second.name)};
        }
        continue;
      }
      std::int64_t used = usage.subtreeUsed(scope, key);
      std::int64_t hard = hrq.hard.get(key);
      if (used + ask.amount > hard) {
        return Refusal{Code::BudgetExceeded,
                       fmt::format("hierarchicalresourcequota {}/{} limits {} to {} for the subtree of {}: {}", hrq.ns,
                                   hrq.name, key, hard, scope, usageText(used, ask, hard))};
      }
    }
  }
  auto [first, last] = namespacedRange(cluster.quotas, ns);
  for (auto it = first; it != last; ++it) {
    const auto& rq = it->second;
    if (!rq.hard.contains(key)) continue;
    std::int64_t used = usage.namespaceUsed(ns, key);
    std::int64_t hard = rq.hard.get(key);
    if (used + ask.amount > hard) {
      return Refusal{Code::BudgetExceeded, fmt::format("resourcequota {}/{} limits {} to {}: {}", rq.ns, rq.name, key,
                                                       hard, usageText(used, ask, hard))};
    }
  }
  return std::nullopt;
}

}  // namespace tally::model
