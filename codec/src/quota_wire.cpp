#include "tally/codec/quota_wire.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include "tally/common/json.hpp"

namespace tally::codec {

namespace od = simdjson::ondemand;

namespace {

DecodeError decodeError(std::string_view what) { return DecodeError{"", "", std::string(what)}; }

// The keys of fieldsV1 {"f:spec":{"f:hard":{"f:<key>":{}}}}.
void ownedHardKeys(od::value fields, std::set<std::string>& out) {
  od::object spec, hard;
  if (fields.find_field_unordered("f:spec").get_object().get(spec)) return;
  if (spec.find_field_unordered("f:hard").get_object().get(hard)) return;
  for (auto field : hard) {
    std::string_view key;
    if (field.unescaped_key().get(key)) continue;
    if (key.starts_with("f:")) out.insert(std::string(key.substr(2)));
  }
}

std::string quantityText(std::int64_t n) { return std::to_string(n); }

std::string applyBody(std::string_view apiVersion, std::string_view kind, std::string_view name, std::string_view ns,
                      const model::ResourceList& hard) {
  JsonWriter w;
  w.beginObject().field("apiVersion", apiVersion).field("kind", kind);
  w.key("metadata").beginObject().field("name", name).field("namespace", ns).endObject();
  if (!hard.empty()) {
    w.key("spec").beginObject().key("hard").beginObject();
    for (const auto& [key, amount] : hard) w.field(key, quantityText(amount));
    w.endObject().endObject();
  }
  w.endObject();
  return w.str();
}

void appendHardUsed(std::string& out, std::string_view name, const std::optional<model::HardUsed>& v) {
  appendJsonString(out, name);
  out += v ? fmt::format(":{{\"hard\":{},\"used\":{}}}", v->hard, v->used) : std::string(":null");
}

}  // namespace

Result<ObservedQuota> observeQuota(std::string_view json, std::string_view fieldManager) {
  ObservedQuota out;
  out.exists = true;
  simdjson::padded_string padded(json);
  od::parser parser;
  od::document doc;
  od::object root;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(root))
    return decodeError("quota object is no JSON object");
  od::object metadata;
  if (!root.find_field_unordered("metadata").get_object().get(metadata)) {
    od::array managed;
    if (!metadata.find_field_unordered("managedFields").get_array().get(managed)) {
      for (auto element : managed) {
        od::object entry;
        if (element.get_object().get(entry)) continue;
        std::string manager, operation, subresource;
        std::set<std::string> keys;
        for (auto field : entry) {
          std::string_view key, text;
          if (field.unescaped_key().get(key)) break;
          od::value value;
          if (field.value().get(value)) break;
          if (key == "manager" && !value.get_string().get(text)) manager = text;
          if (key == "operation" && !value.get_string().get(text)) operation = text;
          if (key == "subresource" && !value.get_string().get(text)) subresource = text;
          if (key == "fieldsV1") ownedHardKeys(value, keys);
        }
        if (manager == fieldManager && operation == "Apply" && subresource.empty()) out.owned.merge(keys);
      }
    }
  }
  od::object spec, hard;
  if (!root.find_field_unordered("spec").get_object().get(spec) &&
      !spec.find_field_unordered("hard").get_object().get(hard)) {
    for (auto field : hard) {
      std::string_view key, text;
      if (field.unescaped_key().get(key)) return decodeError("spec.hard: unreadable key");
      if (field.value().get_string().get(text)) {
        // Quantities may be written as JSON numbers by some clients.
        od::value value;
        if (field.value().get(value)) return decodeError("spec.hard: unreadable value");
        text = value.raw_json_token();
      }
      out.hard[std::string(key)] = std::string(text);
    }
  }
  return out;
}

std::string hrqApplyBody(std::string_view ns, const model::ResourceList& hard) {
  return applyBody("hnc.x-k8s.io/v1alpha2", "HierarchicalResourceQuota", model::kOrgQuotaName, ns, hard);
}

std::string resourceQuotaApplyBody(std::string_view ns, const model::ResourceList& hard) {
  return applyBody("v1", "ResourceQuota", model::kProjectQuotaName, ns, hard);
}

std::string acceleratorStatusPatch(const std::map<std::string, model::AcceleratorUsage>& observed,
                                   const std::map<std::string, model::AcceleratorUsage>& desired) {
  std::string out = R"({"status":{"quotaUsage":{"accelerators":{)";
  bool first = true;
  for (const auto& [profile, usage] : desired) {
    if (!first) out += ',';
    first = false;
    appendJsonString(out, profile);
    out += ":{";
    appendHardUsed(out, "shares", usage.shares);
    out += ',';
    appendHardUsed(out, "memoryMiB", usage.memoryMiB);
    out += ',';
    appendHardUsed(out, "corePercent", usage.corePercent);
    out += ',';
    appendHardUsed(out, "devices", usage.devices);
    out += '}';
  }
  for (const auto& [profile, usage] : observed) {
    if (desired.contains(profile)) continue;
    if (!first) out += ',';
    first = false;
    appendJsonString(out, profile);
    out += ":null";
  }
  out += "}}}}";
  return out;
}

}  // namespace tally::codec
