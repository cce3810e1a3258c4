#include "tally/model/tenancy.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "lookup.hpp"

namespace tally::model {

using detail::chainOf;
using detail::namespacedRange;

std::vector<std::string> selfAndAncestors(const Namespace& ns) {
  std::vector<std::pair<int, std::string>> byDepth;
  bool sawSelf = false;
  for (const auto& [name, depth] : ns.tree) {
    byDepth.emplace_back(depth, name);
    sawSelf = sawSelf || name == ns.name;
  }
  if (!sawSelf) byDepth.emplace_back(0, ns.name);
  std::sort(byDepth.begin(), byDepth.end());
  std::vector<std::string> out;
  out.reserve(byDepth.size());
  for (auto& [depth, name] : byDepth) out.push_back(std::move(name));
  return out;
}

const Organization* organizationOf(const Cluster& cluster, std::string_view ns) {
  for (const auto& candidate : chainOf(cluster, ns)) {
    auto [first, last] = namespacedRange(cluster.organizations, candidate);
    if (first != last) return &first->second;
  }
  return nullptr;
}

const HierarchicalResourceQuota* organizationQuota(const Cluster& cluster, const Organization& org) {
  auto it = cluster.hrqs.find(objectKey(org.ns, kOrgQuotaName));
  return it == cluster.hrqs.end() ? nullptr : &it->second;
}

std::optional<std::string> unattributedNamespace(const Cluster& cluster, std::string_view ns) {
  const TenancyPolicy& policy = cluster.tenancy;
  if (policy.unorganized == UnorganizedGpuPolicy::Allow || policy.systemNamespaces.contains(ns)) return std::nullopt;
  if (!cluster.namespaces.contains(std::string(ns))) return std::nullopt;
  if (organizationOf(cluster, ns)) return std::nullopt;
  std::string why;
  if (!cluster.configured(Kind::Organization)) {
    why = " (Organizations are not watched: --watch-organizations=false)";
  } else if (!cluster.synced(Kind::Organization)) {
    why = " (the Organization cache is not synced yet)";
  }
  return fmt::format(
      "namespace {} is under no Organization{}: its GPU use could not be attributed to any tenant's quota "
      "(--unorganized-gpu-namespaces={}; system namespaces: --system-namespaces)",
      ns, why, toString(policy.unorganized));
}

bool entitled(const Cluster& cluster, std::string_view ns, std::string_view className) {
  for (const auto& name : chainOf(cluster, ns)) {
    auto it = cluster.namespaces.find(name);
    if (it == cluster.namespaces.end()) continue;
    const auto& classes = it->second.entitledClasses;
    if (std::find(classes.begin(), classes.end(), className) != classes.end()) return true;
  }
  return false;
}

std::optional<std::string> notEntitled(const Cluster& cluster, std::string_view ns, const DeviceClass& cls) {
  if (!cls.requiresEntitlement || entitled(cluster, ns, cls.name)) return std::nullopt;
  return fmt::format("namespace {} is not entitled to licensed class {} (label {}{}=\"true\" on it or an ancestor)", ns,
                     cls.name, kEntitlementLabelPrefix, cls.name);
}

}  // namespace tally::model
