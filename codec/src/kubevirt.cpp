#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readHostDevices(od::value value, std::string_view field, bool mediated,
                       std::vector<model::PermittedHostDevice>& out) {
  const std::string_view selectorKey = mediated ? "mdevNameSelector" : "pciVendorSelector";
  return forEachElement(value, field, [&](std::size_t index, od::value element) -> Status {
    model::PermittedHostDevice& device = out.emplace_back();
    device.mediated = mediated;
    Status read = forEachField(element, indexField(index), [&](std::string_view key, od::value entry) -> Status {
      if (key == "resourceName") return readString(entry, key, device.resourceName);
      if (key == selectorKey) return readString(entry, key, device.selector);
      if (key == "externalResourceProvider") return readBool(entry, key, device.externalResourceProvider);
      return {};
    });
    if (!read) return read;
    if (device.resourceName.empty()) return fieldError(joinField(indexField(index), "resourceName"), "missing");
    return {};
  });
}

}  // namespace

Result<std::vector<model::PermittedHostDevice>> decodeKubeVirt(od::value json, ObjectMeta* out) {
  std::vector<model::PermittedHostDevice> pci;
  std::vector<model::PermittedHostDevice> mediated;
  Metadata meta;
  meta.sink = out;
  // spec.configuration.permittedHostDevices.{pciHostDevices,mediatedDevices}
  Status status = forEachField(json, "", [&](std::string_view key, od::value spec) -> Status {
    if (key == "metadata") return readMetadata(spec, meta);
    if (key != "spec") return {};
    return forEachField(spec, key, [&](std::string_view specKey, od::value configuration) -> Status {
      if (specKey != "configuration") return {};
      return forEachField(configuration, specKey, [&](std::string_view configKey, od::value permitted) -> Status {
        if (configKey != "permittedHostDevices") return {};
        return forEachField(permitted, configKey, [&](std::string_view listKey, od::value list) -> Status {
          if (listKey == "pciHostDevices") return readHostDevices(list, listKey, false, pci);
          if (listKey == "mediatedDevices") return readHostDevices(list, listKey, true, mediated);
          return {};
        });
      });
    });
  });
  if (!status) return inObject(std::move(status).error(), "KubeVirt", meta);
  pci.insert(pci.end(), mediated.begin(), mediated.end());
  return pci;
}

}  // namespace tally::codec
