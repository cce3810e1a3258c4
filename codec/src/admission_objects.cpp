#include "tally/codec/admission_objects.hpp"

#include "tally/codec/dra_objects.hpp"

#include <fmt/format.h>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"
#include "tally/common/object_meta_decode.hpp"

namespace tally::codec {

namespace od = simdjson::ondemand;

DomainDevices readDomainDevices(const simdjson::padded_string& json) {
  DomainDevices out;
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root, spec, domain, devices;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root)) {
    out.error = "the VMI is not a JSON object";
    return out;
  }
  if (root.find_field_unordered("spec").get_object().get(spec)) return out;
  if (spec.find_field_unordered("domain").get_object().get(domain)) return out;
  out.hasDomain = true;
  if (domain.find_field_unordered("devices").get_object().get(devices)) return out;
  out.hasDevices = true;
  simdjson::ondemand::array gpus;
  if (devices.find_field_unordered("gpus").get_array().get(gpus)) return out;
  for (auto element : gpus) {
    simdjson::ondemand::object gpu;
    std::string_view raw;
    if (element.get_object().get(gpu) || gpu.raw_json().get(raw)) {
      out.error = "spec.domain.devices.gpus holds an entry that is not an object";
      return out;
    }
    std::string text(raw);
    simdjson::padded_string padded(text);
    simdjson::ondemand::parser inner;
    simdjson::ondemand::document entry;
    std::string_view name;
    if (inner.iterate(padded).get(entry) || entry.find_field_unordered("name").get_string().get(name)) name = {};
    out.gpus.emplace_back(std::string(name), std::move(text));
  }
  return out;
}

namespace {

// Member `name` of `parent`: false when absent or null (then `out` is unset).
simdjson::error_code member(od::object& parent, std::string_view name, od::value& out, bool& present) {
  present = false;
  auto found = parent.find_field_unordered(name);
  if (found.error() == simdjson::NO_SUCH_FIELD) return simdjson::SUCCESS;
  if (found.error()) return found.error();
  out = std::move(found).value_unsafe();
  od::json_type type;
  if (auto e = out.type().get(type)) return e;
  present = type != od::json_type::null;
  return simdjson::SUCCESS;
}

bool isPin(od::value expression, std::string_view node, simdjson::error_code& error) {
  od::object object;
  if ((error = expression.get_object().get(object))) return false;
  std::string key, op;
  std::vector<std::string> values;
  for (auto entry : object) {
    od::field field;
    std::string_view name;
    if ((error = std::move(entry).get(field)) || (error = field.unescaped_key().get(name))) return false;
    od::value v = field.value();
    if (name == "key" || name == "operator") {
      std::string_view s;
      if ((error = v.get_string().get(s))) return false;
      (name == "key" ? key : op) = std::string(s);
    } else if (name == "values") {
      od::array array;
      if ((error = v.get_array().get(array))) return false;
      for (auto element : array) {
        std::string_view s;
        if ((error = element.get_string().get(s))) return false;
        values.emplace_back(s);
      }
    }
  }
  return key == "metadata.name" && op == "In" && values.size() == 1 && values.front() == node;
}

simdjson::error_code readTerm(od::value value, std::string_view node, RequiredAffinity::Term& term) {
  od::json_type type;
  if (auto e = value.type().get(type)) return e;
  if (type == od::json_type::null) return simdjson::SUCCESS;
  od::object object;
  if (auto e = value.get_object().get(object)) return e;
  for (auto entry : object) {
    od::field field;
    std::string_view name;
    if (auto e = std::move(entry).get(field)) return e;
    if (auto e = field.unescaped_key().get(name)) return e;
    od::value v = field.value();
    if (v.type().get(type)) return simdjson::INCORRECT_TYPE;
    if (type == od::json_type::null || (name != "matchExpressions" && name != "matchFields")) continue;
    od::array array;
    if (auto e = v.get_array().get(array)) return e;
    for (auto element : array) {
      od::value expression;
      if (auto e = std::move(element).get(expression)) return e;
      term.empty = false;
      if (name == "matchExpressions") continue;  // skipped unread by the iterator
      simdjson::error_code error = simdjson::SUCCESS;
      term.pinned = isPin(expression, node, error) || term.pinned;
      if (error) return error;
    }
    if (name == "matchFields") term.hasMatchFields = true;
  }
  return simdjson::SUCCESS;
}

// The created Pod's spec, read on `parser`; the part that cannot be read
// ("JSON", "spec") when it cannot.
struct PodSpecOf {
  od::parser parser;
  od::document doc;
  od::object spec;
  const char* open(const simdjson::padded_string& json) {
    od::object root;
    od::value value;
    bool present = false;
    if (parser.iterate(json).get(doc) || doc.get_object().get(root)) return "JSON";
    if (member(root, "spec", value, present) || !present || value.get_object().get(spec)) return "spec";
    return nullptr;
  }
};

}  // namespace

RequiredAffinity readRequiredAffinity(const simdjson::padded_string& json, std::string_view node) {
  RequiredAffinity out;
  auto fail = [&](std::string where) {
    out.error = "the created Pod's " + where + " cannot be read";
    return out;
  };
  PodSpecOf pod;
  if (const char* unread = pod.open(json)) return fail(unread);
  od::object& spec = pod.spec;
  od::value value;
  bool present = false;
  od::object affinity, nodeAffinity, required;
  if (member(spec, "affinity", value, present)) return fail("spec.affinity");
  if (!present) return out;
  if (value.get_object().get(affinity)) return fail("spec.affinity");
  out.missing = RequiredAffinity::Missing::NodeAffinity;
  if (member(affinity, "nodeAffinity", value, present)) return fail("spec.affinity.nodeAffinity");
  if (!present) return out;
  if (value.get_object().get(nodeAffinity)) return fail("spec.affinity.nodeAffinity");
  out.missing = RequiredAffinity::Missing::Required;
  const std::string requiredPath = "spec.affinity.nodeAffinity." + std::string(kRequiredNodeAffinity);
  if (member(nodeAffinity, kRequiredNodeAffinity, value, present)) return fail(requiredPath);
  if (!present) return out;
  if (value.get_object().get(required)) return fail(requiredPath);
  out.missing = RequiredAffinity::Missing::Terms;
  if (member(required, "nodeSelectorTerms", value, present)) return fail(requiredPath + ".nodeSelectorTerms");
  if (!present) return out;
  out.missing = RequiredAffinity::Missing::Nothing;
  od::array terms;
  if (value.get_array().get(terms)) return fail(requiredPath + ".nodeSelectorTerms");
  for (auto element : terms) {
    od::value term;
    if (std::move(element).get(term) || readTerm(term, node, out.terms.emplace_back())) {
      return fail(requiredPath + ".nodeSelectorTerms[" + std::to_string(out.terms.size() - 1) + "]");
    }
  }
  return out;
}

namespace {

const std::string kAffinityPath = "/spec/affinity";
const std::string kNodeAffinityPath = kAffinityPath + "/nodeAffinity";
const std::string kRequiredPath = kNodeAffinityPath + "/" + std::string(kRequiredNodeAffinity);
const std::string kTermsPath = kRequiredPath + "/nodeSelectorTerms";

PatchEdit added(std::string path, std::string valueJson) {
  return {PatchEdit::Op::kAdd, std::move(path), std::move(valueJson)};
}

}  // namespace

std::vector<PatchEdit> nodePinEdits(const RequiredAffinity& affinity, std::string_view node) {
  const std::string expression = R"({"key":"metadata.name","operator":"In","values":[)" + jsonString(node) + "]}";
  const std::string term = R"({"matchFields":[)" + expression + "]}";
  const std::string terms = R"({"nodeSelectorTerms":[)" + term + "]}";
  const std::string required = "{" + jsonString(kRequiredNodeAffinity) + ":" + terms + "}";
  using Missing = RequiredAffinity::Missing;
  switch (affinity.missing) {
    case Missing::Affinity: return {added(kAffinityPath, R"({"nodeAffinity":)" + required + "}")};
    case Missing::NodeAffinity: return {added(kNodeAffinityPath, required)};
    case Missing::Required: return {added(kRequiredPath, terms)};
    case Missing::Terms: return {added(kTermsPath, "[" + term + "]")};
    case Missing::Nothing: break;
  }
  if (affinity.terms.empty()) return {added(kTermsPath + "/-", term)};
  std::vector<PatchEdit> edits;
  for (std::size_t i = 0; i < affinity.terms.size(); ++i) {
    const RequiredAffinity::Term& t = affinity.terms[i];
    if (t.empty || t.pinned) continue;
    const std::string path = kTermsPath + "/" + std::to_string(i) + "/matchFields";
    edits.push_back(t.hasMatchFields ? added(path + "/-", expression) : added(path, "[" + expression + "]"));
  }
  return edits;
}

PatchEdit nodeNameRemoval() { return {PatchEdit::Op::kRemove, "/spec/nodeName", ""}; }

PatchEdit schedulerNameEdit(std::string_view scheduler) { return added("/spec/schedulerName", jsonString(scheduler)); }

ContainerResourceEdits firstContainerResourceEdits(const simdjson::padded_string& json, std::string_view resource,
                                                   std::string_view quantity) {
  ContainerResourceEdits out;
  auto fail = [&](std::string where) {
    out.error = "the created Pod's " + where + " cannot be read";
    return out;
  };
  PodSpecOf pod;
  if (const char* unread = pod.open(json)) return fail(unread);
  od::object& spec = pod.spec;
  od::value value;
  bool present = false;
  od::object container, resources;
  od::array containers;
  if (member(spec, "containers", value, present) || !present || value.get_array().get(containers)) {
    return fail("spec.containers");
  }
  od::value first;
  bool any = false;
  for (auto element : containers) {
    if (std::move(element).get(first) || first.get_object().get(container)) return fail("spec.containers[0]");
    any = true;
    break;
  }
  if (!any) {
    out.error = "the created Pod has no container";
    return out;
  }
  const std::string base = "/spec/containers/0/resources";
  const std::string amount = jsonString(quantity);
  const std::string entry = "{" + jsonString(resource) + ":" + amount + "}";
  if (member(container, "resources", value, present)) return fail("spec.containers[0].resources");
  if (!present) {
    out.edits.push_back(added(base, R"({"requests":)" + entry + R"(,"limits":)" + entry + "}"));
    return out;
  }
  if (value.get_object().get(resources)) return fail("spec.containers[0].resources");
  bool hasRequests = false, hasLimits = false;
  if (member(resources, "requests", value, hasRequests)) return fail("spec.containers[0].resources.requests");
  if (member(resources, "limits", value, hasLimits)) return fail("spec.containers[0].resources.limits");
  const std::string token = jsonPointerToken(resource);
  out.edits.push_back(hasRequests ? added(base + "/requests/" + token, amount) : added(base + "/requests", entry));
  out.edits.push_back(hasLimits ? added(base + "/limits/" + token, amount) : added(base + "/limits", entry));
  return out;
}

// The pod codec read with allowGenerateName or without.
template <bool AllowGenerateName>
struct PodCodecWith {
  using Object = model::Pod;
  static Result<Object> fromJson(od::value json) { return decodePodWith(json, {AllowGenerateName}); }
};

// The object `Codec` decodes, with the request's namespace and name where it
// carries none; a failure described by describe(the codec's error).
template <class Codec, class Describe>
AdmittedObject<typename Codec::Object> decodeAdmitted(const simdjson::padded_string& json,
                                                      std::string_view requestNamespace, std::string_view requestName,
                                                      Describe&& describe) {
  AdmittedObject<typename Codec::Object> out;
  auto decoded = decodeText<Codec>(std::string_view(json.data(), json.size()));
  if (!decoded) {
    out.error = describe(decoded.error().describe());
    return out;
  }
  out.value = std::move(decoded).value();
  if (out.value.ns.empty()) out.value.ns = std::string(requestNamespace);
  if (out.value.name.empty()) out.value.name = std::string(requestName);
  return out;
}

AdmittedObject<model::Pod> decodeAdmittedPod(const simdjson::padded_string& json, std::string_view requestNamespace,
                                             std::string_view requestName, const PodDecodeOptions& options) {
  auto describe = [](const std::string& why) { return "the created Pod cannot be read: " + why; };
  return options.allowGenerateName ? decodeAdmitted<PodCodecWith<true>>(json, requestNamespace, requestName, describe)
                                   : decodeAdmitted<PodCodecWith<false>>(json, requestNamespace, requestName, describe);
}

AdmittedObject<model::GpuDevice> decodeAdmittedGpuDevice(const simdjson::padded_string& json,
                                                         std::string_view requestNamespace,
                                                         std::string_view requestName, std::string_view which) {
  return decodeAdmitted<GpuDeviceCodec>(json, requestNamespace, requestName, [&](const std::string& why) {
    return fmt::format("the {} GPUDevice cannot be read: {}", which, why);
  });
}

AdmittedObject<model::Organization> decodeAdmittedOrganization(const simdjson::padded_string& json,
                                                               std::string_view requestNamespace,
                                                               std::string_view requestName, std::string_view which) {
  return decodeAdmitted<OrganizationCodec>(json, requestNamespace, requestName, [&](const std::string& why) {
    return fmt::format("the {} Organization {}/{} cannot be read: {}", which, requestNamespace, requestName, why);
  });
}

namespace {
struct ClaimAtCreateCodec {
  using Object = model::ResourceClaim;
  static Result<Object> fromJson(od::value json) { return decodeResourceClaimAtCreate(json); }
};
}  // namespace

AdmittedObject<model::ResourceClaim> decodeAdmittedResourceClaim(const simdjson::padded_string& json,
                                                                 std::string_view requestNamespace,
                                                                 std::string_view requestName) {
  return decodeAdmitted<ClaimAtCreateCodec>(json, requestNamespace, requestName, [&](const std::string& why) {
    return fmt::format("the created ResourceClaim cannot be read: {}", why);
  });
}

std::optional<std::string> rawMember(const simdjson::padded_string& json, std::string_view member) {
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(json).get(doc) || doc.get_object().get(object)) return std::nullopt;
  simdjson::ondemand::value value;
  if (object.find_field_unordered(member).get(value)) return std::nullopt;
  std::string_view raw;
  // An object or an array whole (raw_json_token() would give its first
  // character only: two different arrays would compare equal).
  simdjson::ondemand::json_type type;
  if (value.type().get(type)) return std::nullopt;
  if (type == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object inner;
    if (value.get_object().get(inner) || inner.raw_json().get(raw)) return std::nullopt;
  } else if (type == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array inner;
    if (value.get_array().get(inner) || inner.raw_json().get(raw)) return std::nullopt;
  } else {
    raw = value.raw_json_token();
  }
  // raw_json keeps trailing whitespace; the API server writes none, trim anyway.
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\t' || raw.back() == '\r')) {
    raw.remove_suffix(1);
  }
  return std::string(raw);
}

bool holdsFinalizer(const simdjson::padded_string& json, std::string_view finalizer) {
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(json).get(doc) || doc.get_object().get(object)) return false;
  simdjson::ondemand::value metadata;
  if (object.find_field_unordered("metadata").get(metadata)) return false;
  tally::ObjectMeta meta;
  if (!decodeObjectMetaJson(metadata, meta, kMetaFinalizers)) return false;
  return meta.hasFinalizer(finalizer);
}

Result<std::vector<Acknowledgement>> decodeAcknowledgements(std::string_view objectJson) {
  auto bad = [](std::string what) { return DecodeError{"", "", std::move(what)}; };
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(objectJson.data(), objectJson.size()).get(doc)) return bad("the object is not JSON");
  std::vector<Acknowledgement> out;
  simdjson::dom::element list;
  if (doc["spec"]["gateAcknowledgements"].get(list)) return out;
  if (list.is_null()) return out;
  simdjson::dom::array items;
  if (list.get(items)) return bad("spec.gateAcknowledgements is not a list");
  std::size_t index = 0;
  for (auto item : items) {
    if (!item.is_object()) return bad(fmt::format("spec.gateAcknowledgements[{}] is not an object", index));
    Acknowledgement a;
    for (auto [field, target] :
         {std::pair{"failureId", &a.failureId}, std::pair{"role", &a.role}, std::pair{"identity", &a.identity},
          std::pair{"at", &a.at}, std::pair{"note", &a.note}}) {
      simdjson::dom::element e;
      if (item[field].get(e)) continue;
      std::string_view v;
      if (e.get(v)) return bad(fmt::format("spec.gateAcknowledgements[{}].{} is not a string", index, field));
      *target = std::string(v);
    }
    out.push_back(std::move(a));
    ++index;
  }
  return out;
}

}  // namespace tally::codec
