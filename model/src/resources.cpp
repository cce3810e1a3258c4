#include "tally/model/resources.hpp"

#include <algorithm>
#include <cstdint>

#include "saturating.hpp"

namespace tally::model {

namespace {
auto findEntry(const std::vector<ResourceList::Entry>& entries, std::string_view name) {
  return std::lower_bound(entries.begin(), entries.end(), name,
                          [](const ResourceList::Entry& e, std::string_view n) { return e.first < n; });
}
}  // namespace

ResourceList::ResourceList(std::initializer_list<Entry> entries) {
  for (const auto& [name, amount] : entries) add(name, amount);
}

std::int64_t ResourceList::get(std::string_view name) const {
  auto it = findEntry(entries_, name);
  return it != entries_.end() && it->first == name ? it->second : 0;
}

bool ResourceList::contains(std::string_view name) const {
  auto it = findEntry(entries_, name);
  return it != entries_.end() && it->first == name;
}

void ResourceList::set(std::string_view name, std::int64_t amount) {
  auto it = findEntry(entries_, name);
  if (it != entries_.end() && it->first == name) {
    entries_[static_cast<std::size_t>(it - entries_.begin())].second = amount;
    return;
  }
  entries_.insert(entries_.begin() + (it - entries_.begin()), Entry{std::string(name), amount});
}

void ResourceList::add(std::string_view name, std::int64_t amount) {
  if (amount == 0) return;
  auto it = findEntry(entries_, name);
  if (it == entries_.end() || it->first != name) {
    entries_.insert(entries_.begin() + (it - entries_.begin()), Entry{std::string(name), amount});
    return;
  }
  auto pos = entries_.begin() + (it - entries_.begin());
  pos->second = detail::saturatingAdd(pos->second, amount);
  if (pos->second == 0) entries_.erase(pos);
}

std::string quotaKey(std::string_view resourceName) { return "requests." + std::string(resourceName); }

bool isExtendedResourceName(std::string_view name) {
  auto slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) return false;
  std::string_view domain = name.substr(0, slash);
  // The one kubernetes.io domain of extended resources: the name Kubernetes
  // gives a DRA DeviceClass's devices ("deviceclass.resource.kubernetes.io/<class>").
  if (domain == kDraExtendedResourceDomain) return true;
  if (domain == "kubernetes.io" || domain.ends_with(".kubernetes.io")) return false;
  // Quota keys ("requests.x/y") are not resource names.
  return !domain.starts_with("requests.") && !domain.starts_with("limits.");
}

bool isGpuVendorResourceName(std::string_view name) {
  return name.starts_with("nvidia.com/") || name.starts_with("amd.com/gpu") || name.starts_with("gpu.intel.com/");
}

bool isGpuQuotaKey(std::string_view key) {
  for (std::string_view prefix : {std::string_view("requests."), std::string_view("limits.")}) {
    if (key.starts_with(prefix)) return isExtendedResourceName(key.substr(prefix.size()));
  }
  return isExtendedResourceName(key);
}

}  // namespace tally::model
