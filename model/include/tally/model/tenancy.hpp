#pragma once
// The tenant tree, read from HNC's namespace labels without extra reads.

#include <optional>
#include <string>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

// The namespace and its ancestors, nearest first (itself, parent, ..., root).
// Falls back to the namespace alone when it carries no tree labels.
std::vector<std::string> selfAndAncestors(const Namespace& ns);

// The organization a namespace belongs to: the nearest namespace in its chain
// that holds an Organization object.
const Organization* organizationOf(const Cluster& cluster, std::string_view ns);

// The organization's quota: HRQ `plan-quota` in the organization namespace.
const HierarchicalResourceQuota* organizationQuota(const Cluster& cluster, const Organization& org);

// Whether GPU use in `ns` can be attributed to a tenant under the cluster's
// TenancyPolicy. Null when it can: an Organization holds the namespace or an
// ancestor, the namespace is one of the policy's system namespaces, or the
// policy allows use outside Organizations. Otherwise why not, naming the
// namespace (and that Organizations are not watched, or not synced yet, when
// that is why none is seen). A namespace the cache does not hold is left to
// the budget rule (NamespaceUnknown).
std::optional<std::string> unattributedNamespace(const Cluster& cluster, std::string_view ns);

// Whether the namespace or an ancestor carries gpu.tally.dev/entitled-<class>: "true".
bool entitled(const Cluster& cluster, std::string_view ns, std::string_view className);
// Why `ns` may not take units of `cls`: the class requires an entitlement
// (vGPU licensing) and neither the namespace nor an ancestor is entitled to
// it. Null when it may. One rule for every door that sells the class's units:
// device orders, claims and pods.
std::optional<std::string> notEntitled(const Cluster& cluster, std::string_view ns, const DeviceClass& cls);

}  // namespace tally::model
