#pragma once
// Integer resource amounts keyed by resource name (e.g. "nvidia.com/gpu" -> 2).
// GPU resources are counted in whole units; quota keys carry their prefix
// ("requests.nvidia.com/gpu").

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::model {

// The domain of the extended resource name Kubernetes gives a DRA DeviceClass
// without one of its own: an extended resource although it is a kubernetes.io
// domain.
inline constexpr std::string_view kDraExtendedResourceDomain = "deviceclass.resource.kubernetes.io";

// A small sorted list of (name, amount); pods and nodes carry few GPU resources,
// so a flat vector beats a map in size and lookup time.
class ResourceList {
 public:
  using Entry = std::pair<std::string, std::int64_t>;

  ResourceList() = default;
  ResourceList(std::initializer_list<Entry> entries);

  std::int64_t get(std::string_view name) const;
  bool contains(std::string_view name) const;
  // set() keeps a zero (a quota limit of 0 is a limit); add() accumulates usage
  // and drops an entry that sums to zero, so equal usage compares equal.
  void set(std::string_view name, std::int64_t amount);
  void add(std::string_view name, std::int64_t amount);
  bool empty() const { return entries_.empty(); }
  std::size_t size() const { return entries_.size(); }
  const std::vector<Entry>& entries() const { return entries_; }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

  friend bool operator==(const ResourceList&, const ResourceList&) = default;

 private:
  std::vector<Entry> entries_;
};

// "requests.<resourceName>", the key quotas use for extended resources.
std::string quotaKey(std::string_view resourceName);

// Whether a resource name is an extended resource (domain-prefixed and outside
// the kubernetes.io domains): what decoders keep, since a GPUDeviceClass may sell
// any extended resource name the CRD accepts, of any vendor.
bool isExtendedResourceName(std::string_view name);

// Whether a resource name is a GPU vendor's (nvidia.com/, amd.com/gpu,
// gpu.intel.com/): a GPU even where no class sells it, so it is never ignored.
bool isGpuVendorResourceName(std::string_view name);

// Whether a quota key may limit a GPU: requests.<name>, limits.<name> or <name>
// of an extended resource.
bool isGpuQuotaKey(std::string_view key);

}  // namespace tally::model
