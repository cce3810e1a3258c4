#pragma once
// Lookups over a Cluster shared by the rule files (not part of the API).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/tenancy.hpp"

namespace tally::model::detail {

// The namespace and its ancestors, nearest first; the namespace alone when unknown.
inline std::vector<std::string> chainOf(const Cluster& cluster, std::string_view ns) {
  auto it = cluster.namespaces.find(std::string(ns));
  if (it == cluster.namespaces.end()) return {std::string(ns)};
  return selfAndAncestors(it->second);
}

// The [first, last) range of a "namespace/name"-keyed map within one namespace.
template <typename Map>
auto namespacedRange(const Map& map, std::string_view ns) {
  std::string prefix = std::string(ns) + "/";
  auto first = map.lower_bound(prefix);
  auto last = first;
  while (last != map.end() && last->first.starts_with(prefix)) ++last;
  return std::pair{first, last};
}

inline const DeviceClass* findClass(const Cluster& cluster, std::string_view name) {
  auto it = cluster.classes.find(std::string(name));
  return it == cluster.classes.end() ? nullptr : &it->second;
}

// Organization by its name (ledger records and plan changes name it).
inline const Organization* findOrganization(const Cluster& cluster, std::string_view name) {
  for (const auto& [key, org] : cluster.organizations) {
    if (org.name == name) return &org;
  }
  return nullptr;
}

}  // namespace tally::model::detail
