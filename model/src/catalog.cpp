#include "tally/model/catalog.hpp"

#include <algorithm>

namespace tally::model {

DeviceOrder catalogOrder(std::string_view ns, std::string_view className, std::int64_t count) {
  return DeviceOrder{std::string(ns),
                     "gpudevice/" + std::string(ns) + "/(catalogue order)",
                     {DeviceTemplate{std::string(className), count}}};
}

CatalogOptions catalogOptions(const Cluster& cluster, const CapacityView& view, std::string_view ns) {
  CatalogOptions out;
  out.ns = std::string(ns);
  for (const auto& [name, cls] : cluster.classes) {
    ClassOption option;
    option.className = name;
    option.resourceName = cls.resourceName;
    option.workload = cls.workload;
    option.allocation = cls.allocation;
    option.maxCount = cls.maxCount;
    // Counts are asked in turn and the first refused one stops the scan, so
    // "largestCount" promises every count up to it, as the webhook will decide.
    const std::int64_t top = std::max<std::int64_t>(cls.maxCount, 1);
    for (std::int64_t count = 1; count <= top; ++count) {
      Decision d = checkDeviceOrder(cluster, view, catalogOrder(ns, name, count));
      if (!d.allowed()) {
        option.refusals = std::move(d.refusals);
        break;
      }
      option.largestCount = count;
    }
    option.orderable = option.largestCount > 0;
    out.classes.push_back(std::move(option));
  }
  return out;
}

const ClassOption* findOption(const CatalogOptions& options, std::string_view className) {
  for (const auto& o : options.classes) {
    if (o.className == className) return &o;
  }
  return nullptr;
}

}  // namespace tally::model
