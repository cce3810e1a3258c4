#pragma once
// Addresses a Kubernetes resource collection: group/version/resource and an
// optional namespace, rendered to the REST paths the API server serves.

#include <string>
#include <string_view>

#include "tally/common/json.hpp"  // jsonString() for request bodies

namespace tally::runtime {

struct Resource {
  std::string group;  // empty for the core group
  std::string version;
  std::string resource;    // plural, e.g. "pods"
  std::string namespace_;  // empty: cluster-scoped or all namespaces

  static Resource core(std::string resource, std::string ns = {}) {
    return Resource{"", "v1", std::move(resource), std::move(ns)};
  }
  static Resource of(std::string group, std::string version, std::string resource, std::string ns = {}) {
    return Resource{std::move(group), std::move(version), std::move(resource), std::move(ns)};
  }
  Resource inNamespace(std::string ns) const {
    Resource r = *this;
    r.namespace_ = std::move(ns);
    return r;
  }

  std::string collectionPath() const {
    std::string p = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
    if (!namespace_.empty()) p += "/namespaces/" + namespace_;
    return p + "/" + resource;
  }
  std::string objectPath(std::string_view name, std::string_view subresource = {}) const {
    std::string p = collectionPath() + "/" + std::string(name);
    if (!subresource.empty()) p += "/" + std::string(subresource);
    return p;
  }
  std::string describe() const {
    std::string d = resource;
    if (!group.empty()) d += "." + group;
    if (!namespace_.empty()) d += " in " + namespace_;
    return d;
  }
};

// Percent-encodes a query parameter value.
std::string urlEncode(std::string_view in);

}  // namespace tally::runtime
