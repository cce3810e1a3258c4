#include <string>

#include "metadata.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/codec/objects.hpp"
#include "tally/model/ledger.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readTime(od::value value, std::string_view field, model::Timestamp& out) {
  std::string text;
  if (auto read = readString(value, field, text); !read) return read;
  auto t = parseRfc3339(text);
  if (!t) return fieldError(field, t.error().describe());
  out = t.value().seconds;
  return {};
}

Status readNames(od::value value, std::string_view field, std::vector<std::string>& out) {
  return forEachElement(value, field, [&](std::size_t i, od::value item) -> Status {
    return readString(item, indexField(i), out.emplace_back());
  });
}

// The attachment the VM door writes: status.attachedTo, or the template-of
// annotation of a device it created (the same fields, the VMI as "vmi").
Status readAttachment(od::value value, std::string_view field, model::GpuDevice& device, bool annotation) {
  model::ObjectRef& ref = device.attachedTo;
  return forEachField(value, field, [&](std::string_view key, od::value f) -> Status {
    if (key == "namespace") return readString(f, key, ref.ns);
    if (key == (annotation ? "vmi" : "name")) return readString(f, key, ref.name);
    if (key == "uid" && !annotation) return readString(f, key, ref.uid);
    if (key == "token") return readString(f, key, device.attachToken);
    if (key == "set") return readNames(f, key, device.attachSet);
    if (key == "since") return readTime(f, key, device.attachedAt);
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
    if (key == "attachedTo") return readAttachment(field, key, device, false);
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
  std::string templateOf;  // the annotation's text, read once the status is known
  MetadataHooks hooks{.created = true, .finalizers = conditions != nullptr};
  hooks.annotation = [&](std::string_view key, std::string_view value) -> Status {
    if (key == model::kAnnotationTemplateOf) templateOf = value;
    return {};
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
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
  if (!templateOf.empty()) {
    device.fromTemplate = true;
    // Until the status records it, the annotation is the attachment.
    if (device.attachedTo.empty()) {
      Status read = withEmbeddedJson(templateOf, "",
                                     [&](od::value root) -> Status { return readAttachment(root, "", device, true); });
      if (!read) {
        return inObject(
            std::move(read).error().under("metadata.annotations[" + std::string(model::kAnnotationTemplateOf) + "]"),
            kKind, meta);
      }
    }
  }
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
