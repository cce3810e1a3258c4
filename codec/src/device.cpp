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

Status readCondition(od::value value, Condition& c) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "type") return readString(field, key, c.type);
    if (key == "status") return readString(field, key, c.status);
    if (key == "reason") return readString(field, key, c.reason);
    if (key == "message") return readString(field, key, c.message);
    if (key == "lastTransitionTime") return readString(field, key, c.lastTransitionTime);
    if (key == "observedGeneration") return readCount(field, key, c.observedGeneration);
    return {};
  });
}

Status readStatus(od::value value, model::GpuDevice& device, std::vector<Condition>* conditions) {
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
    if (key == "conditions" && conditions) {
      return forEachElement(field, key, [&](std::size_t i, od::value item) -> Status {
        auto read = readCondition(item, conditions->emplace_back());
        if (!read) return std::move(read).error().under(indexField(i));
        return {};
      });
    }
    return {};
  });
}

// One pass for both decoders: conditions and finalizers only when asked for.
Result<model::GpuDevice> decodeDevice(od::value json, ObjectMeta* out, std::vector<Condition>* conditions) {
  model::GpuDevice device;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") {
      return readMetadata(field, meta, MetadataHooks{.created = true, .finalizers = conditions != nullptr});
    }
    if (key == "spec") {
      return forEachField(field, key, [&](std::string_view specKey, od::value specField) -> Status {
        if (specKey == "class") return readString(specField, specKey, device.className);
        if (specKey == "count") return readCount(specField, specKey, device.count);
        return {};
      });
    }
    if (key == "status") return readStatus(field, device, conditions);
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

}  // namespace

Result<model::GpuDevice> decodeGpuDevice(od::value json, ObjectMeta* out) { return decodeDevice(json, out, nullptr); }

Result<GpuDeviceRecord> decodeGpuDeviceRecord(od::value json) {
  GpuDeviceRecord record;
  auto device = decodeDevice(json, &record.meta, &record.conditions);
  if (!device) return std::move(device).error();
  record.device = std::move(device).value();
  return record;
}

}  // namespace tally::codec
