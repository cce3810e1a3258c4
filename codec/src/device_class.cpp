#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"
#include "tally/model/dra.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readWorkload(od::value value, std::string_view field, model::Workload& out) {
  std::string text;
  if (auto read = readString(value, field, text); !read) return read;
  if (text == "vm") {
    out = model::Workload::Vm;
  } else if (text == "pod") {
    out = model::Workload::Pod;
  } else {
    return fieldError(field, "unknown workload \"" + text + "\" (want vm or pod)");
  }
  return {};
}

Status readAllocation(od::value value, std::string_view field, model::Allocation& out) {
  std::string text;
  if (auto read = readString(value, field, text); !read) return read;
  if (text == "passthrough") {
    out = model::Allocation::Passthrough;
  } else if (text == "vgpu") {
    out = model::Allocation::Vgpu;
  } else if (text == "shared") {
    out = model::Allocation::Shared;
  } else {
    return fieldError(field, "unknown allocation \"" + text + "\" (want passthrough, vgpu or shared)");
  }
  return {};
}

Status readNodeMode(od::value value, std::string_view field, std::optional<model::NodeMode>& out) {
  std::string text;
  if (auto read = readString(value, field, text); !read) return read;
  if (text.empty()) return {};
  model::NodeMode mode = model::parseNodeMode(text);
  if (mode == model::NodeMode::Unknown) return fieldError(field, "unknown node mode \"" + text + "\"");
  out = mode;
  return {};
}

Status readShare(od::value value, model::SharePolicy& share) {
  return forEachField(value, "share", [&](std::string_view key, od::value field) -> Status {
    if (key == "memoryMiB") return readCount(field, key, share.memoryMiB);
    if (key == "corePercent") return readCount(field, key, share.corePercent);
    if (key == "maxSharesPerDevice") return readCount(field, key, share.maxSharesPerDevice);
    return {};
  });
}

Status readAcknowledgement(od::value value, model::GateAcknowledgement& ack) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "failureId") return readString(field, key, ack.failureId);
    if (key == "role") return readString(field, key, ack.role);
    if (key == "identity") return readString(field, key, ack.identity);
    return {};
  });
}

// spec.dra: {driver, deviceClassName, attributes: {name: value}, shareCapacity}.
Status readDra(od::value value, model::DraSelection& dra) {
  return forEachField(value, "dra", [&](std::string_view key, od::value field) -> Status {
    if (key == "driver") return readString(field, key, dra.driver);
    if (key == "deviceClassName") return readString(field, key, dra.deviceClassName);
    if (key == "shareCapacity") return readString(field, key, dra.shareCapacity);
    if (key == "attributes") {
      return forEachField(field, key, [&](std::string_view name, od::value v) -> Status {
        return readString(v, keyField(name), dra.attributes[std::string(name)]);
      });
    }
    return {};
  });
}

struct SpecPresence {
  bool allocation = false;
  bool workload = false;
  std::optional<model::NodeMode> nodeMode;
};

Status readSpec(od::value value, model::DeviceClass& cls, SpecPresence& seen) {
  return forEachField(value, "spec", [&](std::string_view key, od::value field) -> Status {
    if (key == "workload") {
      seen.workload = true;
      return readWorkload(field, key, cls.workload);
    }
    if (key == "allocation") {
      seen.allocation = true;
      return readAllocation(field, key, cls.allocation);
    }
    if (key == "resourceName") return readString(field, key, cls.resourceName);
    if (key == "nodeMode") return readNodeMode(field, key, seen.nodeMode);
    if (key == "memoryMiB") return readCount(field, key, cls.memoryMiB);
    if (key == "maxCount") return readCount(field, key, cls.maxCount);
    if (key == "requiresEntitlement") return readBool(field, key, cls.requiresEntitlement);
    if (key == "share") {
      model::SharePolicy share;
      if (auto read = readShare(field, share); !read) return read;
      cls.share = share;
      return {};
    }
    if (key == "operatorSpareDevices") {
      auto null = isNull(field, key);
      if (!null) return std::move(null).error();
      if (*null) return {};
      std::int64_t spare = 0;
      if (auto read = readCount(field, key, spare); !read) return read;
      cls.operatorSpareDevices = spare;
      return {};
    }
    if (key == "dra") {
      model::DraSelection dra;
      if (auto read = readDra(field, dra); !read) return read;
      cls.dra = std::move(dra);
      return {};
    }
    if (key == "singleDevicePilotApproved") return readBool(field, key, cls.singleDevicePilotApproved);
    if (key == "pciVendorSelector") return readString(field, key, cls.pciVendorSelector);
    if (key == "creationPaused") return readBool(field, key, cls.creationPaused);
    if (key == "keepCreationOpenDuringTransactions")
      return readBool(field, key, cls.keepCreationOpenDuringTransactions);
    if (key == "gateAcknowledgements") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        Status read = readAcknowledgement(element, cls.acknowledgements.emplace_back());
        if (!read) return std::move(read).error().under(indexField(index));
        return {};
      });
    }
    return {};
  });
}

// status.gateFailureId and the CreationOpen condition: a condition that is not
// "True" (False, Unknown) keeps the gate closed; none at all leaves the gate
// undecided (model::applyDoorGates closes it: "not audited yet").
Status readStatus(od::value value, model::DeviceClass& cls) {
  return forEachField(value, "status", [&](std::string_view key, od::value field) -> Status {
    if (key == "gateFailureId") return readString(field, key, cls.gateFailureId);
    if (key == "conditions") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        std::string type;
        std::string conditionStatus;
        std::string message;
        Status read = forEachField(element, indexField(index), [&](std::string_view k, od::value v) -> Status {
          if (k == "type") return readString(v, k, type);
          if (k == "status") return readString(v, k, conditionStatus);
          if (k == "message") return readString(v, k, message);
          return {};
        });
        if (!read) return read;
        if (type == "CreationOpen") {
          cls.gateDecided = true;
          cls.gateOpen = conditionStatus == "True";
          cls.gateReason = std::move(message);
        }
        return {};
      });
    }
    return {};
  });
}

}  // namespace

Result<model::DeviceClass> decodeDeviceClass(od::value json, ObjectMeta* out) {
  model::DeviceClass cls;
  cls.gateDecided = false;  // until a CreationOpen condition is read
  Metadata meta;
  meta.sink = out;
  SpecPresence seen;
  bool sawSpec = false;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key == "spec") {
      sawSpec = true;
      return readSpec(field, cls, seen);
    }
    if (key == "status") return readStatus(field, cls);
    return {};
  });
  constexpr std::string_view kKind = "GPUDeviceClass";
  if (auto done = finished(std::move(status), kKind, meta); !done) return std::move(done).error();
  if (!sawSpec) return inObject(fieldError("spec", "missing"), kKind, meta);
  if (!seen.allocation) return inObject(fieldError("spec.allocation", "missing"), kKind, meta);
  if (cls.dra) {
    if (cls.dra->driver.empty()) return inObject(fieldError("spec.dra.driver", "missing"), kKind, meta);
    if (cls.allocation == model::Allocation::Vgpu)
      return inObject(fieldError("spec.allocation", "vgpu is not served by DRA (want passthrough or shared)"), kKind,
                      meta);
    // Without a name of its own the pool sells under the extended resource
    // name Kubernetes gives its DeviceClass.
    if (cls.resourceName.empty() && !cls.dra->deviceClassName.empty())
      cls.resourceName = model::draImplicitResourceName(cls.dra->deviceClassName);
  }
  if (cls.resourceName.empty()) return inObject(fieldError("spec.resourceName", "missing"), kKind, meta);
  if (cls.allocation == model::Allocation::Shared) {
    if (!cls.share) return inObject(fieldError("spec.share", "missing (required for a shared class)"), kKind, meta);
    if (cls.share->memoryMiB <= 0) return inObject(fieldError("spec.share.memoryMiB", "must be above 0"), kKind, meta);
    if (cls.share->corePercent <= 0 || cls.share->corePercent > 100) {
      return inObject(fieldError("spec.share.corePercent", "must be within 1..100"), kKind, meta);
    }
  }
  if (!seen.workload)
    cls.workload = cls.allocation == model::Allocation::Shared || cls.dra ? model::Workload::Pod : model::Workload::Vm;
  // A DRA pool is where its driver publishes, whatever a node's mode label.
  cls.nodeMode = seen.nodeMode.value_or(cls.dra ? model::NodeMode::Unset : model::defaultNodeMode(cls.allocation));
  cls.name = std::move(meta.name);
  cls.deleting = meta.deleting;
  return cls;
}

}  // namespace tally::codec
