#include "tally/codec/catalog_json.hpp"

#include "tally/common/json.hpp"

namespace tally::codec {

std::string encodeCatalog(const model::CatalogOptions& options) {
  JsonWriter json;
  json.beginObject().field("namespace", std::string_view(options.ns)).key("classes").beginArray();
  for (const auto& o : options.classes) {
    json.beginObject()
        .field("class", std::string_view(o.className))
        .field("resourceName", std::string_view(o.resourceName))
        .field("workload", model::toString(o.workload))
        .field("allocation", model::toString(o.allocation))
        .field("maxCount", o.maxCount)
        .field("orderable", o.orderable)
        .field("largestCount", o.largestCount);
    json.key("refusals").beginArray();
    for (const auto& r : o.refusals) {
      json.beginObject()
          .field("code", model::toString(r.code))
          .field("message", std::string_view(r.message))
          .endObject();
    }
    json.endArray().endObject();
  }
  json.endArray().endObject();
  return json.str();
}

}  // namespace tally::codec
