#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) text.remove_suffix(1);
  return text;
}

Status readGpu(od::value value, model::VmiGpu& gpu) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "name") return readString(field, key, gpu.name);
    if (key == "deviceName") return readString(field, key, gpu.deviceName);
    return {};
  });
}

// spec.domain.devices.gpus[]
Status readSpec(od::value value, model::VirtualMachineInstance& vmi) {
  return forEachField(value, "spec", [&](std::string_view key, od::value domain) -> Status {
    if (key != "domain") return {};
    return forEachField(domain, key, [&](std::string_view domainKey, od::value devices) -> Status {
      if (domainKey != "devices") return {};
      return forEachField(devices, domainKey, [&](std::string_view devicesKey, od::value gpus) -> Status {
        if (devicesKey != "gpus") return {};
        return forEachElement(gpus, devicesKey, [&](std::size_t index, od::value element) -> Status {
          Status read = readGpu(element, vmi.gpus.emplace_back());
          if (!read) return std::move(read).error().under(indexField(index));
          return {};
        });
      });
    });
  });
}

Status readStatus(od::value value, model::VirtualMachineInstance& vmi) {
  return forEachField(value, "status", [&](std::string_view key, od::value field) -> Status {
    if (key == "phase") return readString(field, key, vmi.phase);
    if (key == "activePods") {
      return forEachField(field, key, [&](std::string_view podUid, od::value node) -> Status {
        return readString(node, keyField(podUid), vmi.activePods[std::string(podUid)]);
      });
    }
    return {};
  });
}

}  // namespace

Result<std::vector<std::string>> decodeDeviceNames(std::string_view text) {
  std::vector<std::string> names;
  std::string_view body = trim(text);
  if (body.starts_with('[')) {
    Status status = withEmbeddedJson(body, "", [&](od::value root) -> Status {
      return forEachElement(root, "", [&](std::size_t index, od::value element) -> Status {
        return readString(element, indexField(index), names.emplace_back());
      });
    });
    if (!status) return std::move(status).error();
  } else {
    while (!body.empty()) {
      std::size_t comma = body.find(',');
      std::string_view name = trim(body.substr(0, comma));
      if (name.empty()) return detail::fieldError("", "empty device name in \"" + std::string(text) + "\"");
      names.emplace_back(name);
      if (comma == std::string_view::npos) break;
      body.remove_prefix(comma + 1);
      if (trim(body).empty()) return detail::fieldError("", "empty device name in \"" + std::string(text) + "\"");
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) return detail::fieldError(indexField(i), "empty device name");
  }
  return names;
}

Result<std::vector<model::DeviceTemplate>> decodeDeviceTemplates(std::string_view json) {
  std::vector<model::DeviceTemplate> templates;
  Status status = withEmbeddedJson(json, "", [&](od::value root) -> Status {
    return forEachElement(root, "", [&](std::size_t index, od::value element) -> Status {
      model::DeviceTemplate& tmpl = templates.emplace_back();
      Status read = forEachField(element, indexField(index), [&](std::string_view key, od::value field) -> Status {
        if (key == "class") return readString(field, key, tmpl.className);
        if (key == "count") return readCount(field, key, tmpl.count);
        return {};
      });
      if (!read) return read;
      if (tmpl.className.empty()) return fieldError(joinField(indexField(index), "class"), "missing");
      return {};
    });
  });
  if (!status) return std::move(status).error();
  return templates;
}

Result<model::VirtualMachineInstance> decodeVirtualMachineInstance(od::value json, ObjectMeta* out) {
  model::VirtualMachineInstance vmi;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.annotation = [&](std::string_view key, std::string_view value) -> Status {
    if (key == model::kAnnotationVmiDevices) {
      auto names = decodeDeviceNames(value);
      if (!names) return std::move(names).error();
      vmi.heldDevices = std::move(names).value();
    } else if (key == model::kAnnotationVmiDeviceTemplates) {
      auto templates = decodeDeviceTemplates(value);
      if (!templates) return std::move(templates).error();
      vmi.deviceTemplates = std::move(templates).value();
    } else if (key == model::kAnnotationVmiAttachment) {
      vmi.attachToken = value;
    }
    return {};
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    if (key == "spec") return readSpec(field, vmi);
    if (key == "status") return readStatus(field, vmi);
    return {};
  });
  constexpr std::string_view kKind = "VirtualMachineInstance";
  if (auto done = finished(std::move(status), kKind, meta); !done) return std::move(done).error();
  vmi.ns = std::move(meta.ns);
  vmi.name = std::move(meta.name);
  vmi.uid = std::move(meta.uid);
  return vmi;
}

}  // namespace tally::codec
