#include "tally/codec/usage_configmap.hpp"

#include "tally/codec/usage_records.hpp"
#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::codec {

std::string encodeUsageConfigMap(const UsagePart& part) {
  JsonWriter w;
  w.beginObject().field("apiVersion", "v1").field("kind", "ConfigMap").key("metadata").beginObject();
  w.field("name", part.name).field("namespace", part.ns);
  if (!part.resourceVersion.empty()) w.field("resourceVersion", part.resourceVersion);
  w.key("labels")
      .beginObject()
      .field("app.kubernetes.io/managed-by", "tally-controller")
      .field(kUsageLabel, "true")
      .field(kUsageDayLabel, usageDayLabel(part.day))
      .field(kUsagePartLabel, std::to_string(part.part));
  w.endObject().endObject();
  w.key("data").beginObject();
  if (part.through) w.field(kUsageThroughKey, formatRfc3339(*part.through));
  if (part.sealed) w.field(kUsageSealedKey, "true");
  w.field(kUsageKey, part.usage);
  w.endObject().endObject();
  return w.str();
}

}  // namespace tally::codec
