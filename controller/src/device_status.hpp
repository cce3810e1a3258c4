#pragma once
// The whole status of a GPUDevice as Tally writes it (the binder and the VMI
// webhook alike): phase, node, the attachment with its token, set and time,
// observedGeneration and conditions. Both write all of it, pinned to the
// resourceVersion they read, so neither drops what the other wrote.

#include <cstdint>
#include <string>
#include <vector>

#include "tally/codec/objects.hpp"
#include "tally/common/condition.hpp"
#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/objects.hpp"
#include "tally/runtime/client.hpp"

namespace tally::controller::detail {

inline const runtime::Resource& devicesResource() {
  static const runtime::Resource r = runtime::Resource::of("gpu.tally.dev", "v1alpha1", "gpudevices");
  return r;
}

// GET, PATCH and LIST bodies decoded with the metadata and conditions a write needs.
struct RecordCodec {
  using Object = codec::GpuDeviceRecord;
  static runtime::Result<Object> fromJson(simdjson::ondemand::value json) {
    auto decoded = codec::decodeGpuDeviceRecord(json);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    return std::move(decoded).value();
  }
  static std::string key(const Object& o) { return o.meta.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.meta.resourceVersion; }
};

inline std::string deviceStatusJson(const model::GpuDevice& d, const std::vector<Condition>& conditions,
                                    std::int64_t generation) {
  JsonWriter w;
  w.beginObject();
  w.field("phase", model::toString(d.phase));
  if (!d.node.empty()) w.field("node", d.node);
  if (!d.attachedTo.empty()) {
    w.key("attachedTo").beginObject();
    if (!d.attachedTo.ns.empty()) w.field("namespace", d.attachedTo.ns);
    w.field("name", d.attachedTo.name);
    if (!d.attachedTo.uid.empty()) w.field("uid", d.attachedTo.uid);
    if (!d.attachToken.empty()) w.field("token", d.attachToken);
    if (!d.attachSet.empty()) {
      w.key("set").beginArray();
      for (const auto& name : d.attachSet) w.value(name);
      w.endArray();
    }
    if (d.attachedAt > 0) w.field("since", formatRfc3339(d.attachedAt));
    w.endObject();
  }
  if (generation > 0) w.field("observedGeneration", generation);
  w.key("conditions");
  writeConditions(w, conditions);
  w.endObject();
  return w.str();
}

// Whether two devices differ in what deviceStatusJson writes of their attachment.
inline bool sameAttachment(const model::GpuDevice& a, const model::GpuDevice& b) {
  return a.attachedTo == b.attachedTo && a.attachToken == b.attachToken && a.attachSet == b.attachSet &&
         a.attachedAt == b.attachedAt;
}

// The device without its attachment (Attached becomes Bound).
inline model::GpuDevice detached(model::GpuDevice d) {
  d.attachedTo = {};
  d.attachToken.clear();
  d.attachSet.clear();
  d.attachedAt = 0;
  if (d.phase == model::DevicePhase::Attached) d.phase = model::DevicePhase::Bound;
  return d;
}

}  // namespace tally::controller::detail
