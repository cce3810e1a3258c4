#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readAttachedTo(od::value value, model::ObjectRef& ref) {
  return forEachField(value, "attachedTo", [&](std::string_view key, od::value field) -> Status {
    if (key == "namespace") return readString(field, key, ref.ns);
    if (key == "name") return readString(field, key, ref.name);
    if (key == "uid") return readString(field, key, ref.uid);
    return {};
  });
}

Status readStatus(od::value value, model::GpuDevice& device) {
  return forEachField(value, "status", [&](std::string_view key, od::value field) -> Status {
    if (key == "phase") {
      std::string text;
      if (auto read = readString(field, key, text); !read) return read;
      auto phase = model::parseDevicePhase(text);
      if (!phase) return fieldError(key, "unknown phase \"" + text + "\"");
      device.phase = *phase;
      return {};
    }
    if (key == "node") return readString(field, key, device.node);
    if (key == "attachedTo") return readAttachedTo(field, device.attachedTo);
    return {};
  });
}

}  // namespace

Result<model::GpuDevice> decodeGpuDevice(od::value json, ObjectMeta* out) {
  model::GpuDevice device;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, MetadataHooks{.created = true});
    if (key == "spec") {
      return forEachField(field, key, [&](std::string_view specKey, od::value specField) -> Status {
        if (specKey == "class") return readString(specField, specKey, device.className);
        if (specKey == "count") return readCount(specField, specKey, device.count);
        return {};
      });
    }
    if (key == "status") return readStatus(field, device);
    return {};
  });
  constexpr std::string_view kKind = "GPUDevice";
  if (auto done = finished(std::move(status), kKind, meta); !done) return std::move(done).error();
  if (device.className.empty()) return inObject(fieldError("spec.class", "missing"), kKind, meta);
  device.created = meta.created;
  device.ns = std::move(meta.ns);
  device.name = std::move(meta.name);
  device.uid = std::move(meta.uid);
  device.deleting = meta.deleting;
  return device;
}

}  // namespace tally::codec
