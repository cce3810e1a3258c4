#include "tally/codec/device_status.hpp"

#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::codec {

std::string encodeGpuDeviceStatus(const model::GpuDevice& d, const std::vector<Condition>& conditions,
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

std::string encodeTemplateGpuDevice(const TemplateGpuDevice& d) {
  JsonWriter annotation;
  annotation.beginObject().field("vmi", d.vmi).field("token", d.token);
  annotation.key("set").beginArray();
  for (const auto& name : d.set) annotation.value(name);
  annotation.endArray();
  annotation.field("since", formatRfc3339(d.since)).endObject();

  JsonWriter w;
  w.beginObject().field("apiVersion", "gpu.tally.dev/v1alpha1").field("kind", "GPUDevice");
  w.key("metadata").beginObject().field("name", d.name).field("namespace", d.ns);
  if (!d.finalizer.empty()) w.key("finalizers").beginArray().value(d.finalizer).endArray();
  w.key("annotations").beginObject().field(model::kAnnotationTemplateOf, annotation.str()).endObject();
  w.endObject();
  w.key("spec").beginObject().field("class", d.className).field("count", d.count).endObject();
  w.endObject();
  return w.str();
}

}  // namespace tally::codec
