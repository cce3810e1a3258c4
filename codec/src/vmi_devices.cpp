#include "tally/codec/vmi_devices.hpp"

#include <set>

#include "tally/common/json.hpp"

namespace tally::codec {

std::string encodeVmiGpus(const DomainDevices& domain, const std::vector<model::VmiGpu>& ours) {
  std::set<std::string> names;
  for (const auto& g : ours) names.insert(g.name);
  std::string array = "[";
  for (const auto& [name, raw] : domain.gpus) {
    if (names.contains(name)) continue;
    if (array.size() > 1) array += ",";
    array += raw;
  }
  for (const auto& g : ours) {
    JsonWriter entry;
    entry.beginObject().field("name", g.name).field("deviceName", g.deviceName).endObject();
    if (array.size() > 1) array += ",";
    array += entry.str();
  }
  array += "]";
  return domain.hasDevices ? array : "{\"gpus\":" + array + "}";
}

}  // namespace tally::codec
