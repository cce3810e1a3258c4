#include "tally/runtime/admission/review.hpp"

#include <openssl/evp.h>

#include "tally/common/json.hpp"

namespace tally::runtime::admission {

namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";
constexpr std::string_view kKind = "AdmissionReview";

Error decodeError(std::string_view what) { return Error(ErrorCode::kDecode, "AdmissionReview: " + std::string(what)); }

Error jsonFailure(std::string_view what, simdjson::error_code e) {
  return decodeError(std::string(what) + ": " + simdjson::error_message(e));
}

Status stringInto(od::value v, std::string& out, std::string_view what) {
  std::string_view s;
  if (auto e = v.get_string().get(s)) return jsonFailure(std::string(what) + " is not a string", e);
  out.assign(s);
  return {};
}

bool isNull(od::value v) {
  od::json_type t;
  return !v.type().get(t) && t == od::json_type::null;
}

// Calls f(key, value) for every member of the object `v`; stops at the first error.
template <class F>
Status forEachMember(od::value v, std::string_view what, F&& f) {
  od::object object;
  if (auto e = v.get_object().get(object)) return jsonFailure(std::string(what) + " is not an object", e);
  for (auto member : object) {
    od::field field;
    if (auto e = std::move(member).get(field)) return jsonFailure(what, e);
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonFailure(std::string(what) + " has a bad key", e);
    if (auto s = f(key, field.value()); !s) return s;
  }
  return {};
}

Status kindInto(od::value v, GroupVersionKind& out, std::string_view what) {
  return forEachMember(v, what, [&](std::string_view key, od::value fv) -> Status {
    if (key == "group") return stringInto(fv, out.group, std::string(what) + ".group");
    if (key == "version") return stringInto(fv, out.version, std::string(what) + ".version");
    if (key == "kind") return stringInto(fv, out.kind, std::string(what) + ".kind");
    return {};
  });
}

Status resourceInto(od::value v, GroupVersionResource& out, std::string_view what) {
  return forEachMember(v, what, [&](std::string_view key, od::value fv) -> Status {
    if (key == "group") return stringInto(fv, out.group, std::string(what) + ".group");
    if (key == "version") return stringInto(fv, out.version, std::string(what) + ".version");
    if (key == "resource") return stringInto(fv, out.resource, std::string(what) + ".resource");
    return {};
  });
}

// An object member kept as raw JSON; null leaves `out` empty.
Status rawObjectInto(od::value v, simdjson::padded_string& out, std::string_view what) {
  if (isNull(v)) return {};
  od::object object;
  if (auto e = v.get_object().get(object)) return jsonFailure(std::string(what) + " is not an object", e);
  std::string_view raw;
  if (auto e = object.raw_json().get(raw)) return jsonFailure(what, e);
  out = simdjson::padded_string(raw);
  return {};
}

Status userInto(od::value v, UserInfo& out) {
  return forEachMember(v, "request.userInfo", [&](std::string_view key, od::value fv) -> Status {
    if (key == "username") return stringInto(fv, out.username, "request.userInfo.username");
    if (key == "uid") return stringInto(fv, out.uid, "request.userInfo.uid");
    if (key == "groups") {
      if (isNull(fv)) return {};
      od::array groups;
      if (auto e = fv.get_array().get(groups)) return jsonFailure("request.userInfo.groups is not an array", e);
      for (auto item : groups) {
        od::value g;
        if (auto e = std::move(item).get(g)) return jsonFailure("request.userInfo.groups", e);
        if (auto s = stringInto(g, out.groups.emplace_back(), "request.userInfo.groups[]"); !s) return s;
      }
    }
    if (key == "extra") {
      if (isNull(fv)) return {};
      od::object extra;
      if (auto e = fv.get_object().get(extra)) return jsonFailure("request.userInfo.extra is not an object", e);
      std::string_view raw;
      if (auto e = extra.raw_json().get(raw)) return jsonFailure("request.userInfo.extra", e);
      out.extraJson = std::string(raw);
    }
    return {};
  });
}

Status operationInto(od::value v, Operation& out, bool& seen) {
  std::string name;
  if (auto s = stringInto(v, name, "request.operation"); !s) return s;
  seen = true;
  if (name == "CREATE") {
    out = Operation::kCreate;
  } else if (name == "UPDATE") {
    out = Operation::kUpdate;
  } else if (name == "DELETE") {
    out = Operation::kDelete;
  } else if (name == "CONNECT") {
    out = Operation::kConnect;
  } else {
    return decodeError("request.operation \"" + name + "\" is none of CREATE, UPDATE, DELETE, CONNECT");
  }
  return {};
}

Status requestInto(od::value v, AdmissionRequest& out, bool& operationSeen) {
  return forEachMember(v, "request", [&](std::string_view key, od::value fv) -> Status {
    if (key == "uid") return stringInto(fv, out.uid, "request.uid");
    if (key == "kind") return kindInto(fv, out.kind, "request.kind");
    if (key == "resource") return resourceInto(fv, out.resource, "request.resource");
    if (key == "subResource") return stringInto(fv, out.subResource, "request.subResource");
    if (key == "requestKind") {
      if (isNull(fv)) return {};
      return kindInto(fv, out.requestKind.emplace(), "request.requestKind");
    }
    if (key == "requestResource") {
      if (isNull(fv)) return {};
      return resourceInto(fv, out.requestResource.emplace(), "request.requestResource");
    }
    if (key == "requestSubResource") return stringInto(fv, out.requestSubResource, "request.requestSubResource");
    if (key == "name") return stringInto(fv, out.name, "request.name");
    if (key == "namespace") return stringInto(fv, out.namespace_, "request.namespace");
    if (key == "operation") return operationInto(fv, out.operation, operationSeen);
    if (key == "userInfo") return userInto(fv, out.userInfo);
    if (key == "dryRun") {
      if (isNull(fv)) return {};
      if (auto e = fv.get_bool().get(out.dryRun)) return jsonFailure("request.dryRun is not a boolean", e);
      return {};
    }
    if (key == "object") return rawObjectInto(fv, out.object, "request.object");
    if (key == "oldObject") return rawObjectInto(fv, out.oldObject, "request.oldObject");
    if (key == "options") return rawObjectInto(fv, out.options, "request.options");
    return {};
  });
}

// What a request must carry, checked once the review is known to be one.
Status validateRequest(const AdmissionRequest& out, bool operationSeen) {
  if (out.uid.empty()) return decodeError("request.uid is missing");
  if (!operationSeen) return decodeError("request.operation is missing");
  if (out.kind.kind.empty() || out.kind.version.empty()) return decodeError("request.kind is missing");
  if (out.resource.resource.empty() || out.resource.version.empty()) {
    return decodeError("request.resource is missing");
  }
  return {};
}

}  // namespace

std::string_view operationName(Operation op) {
  switch (op) {
    case Operation::kCreate: return "CREATE";
    case Operation::kUpdate: return "UPDATE";
    case Operation::kDelete: return "DELETE";
    case Operation::kConnect: return "CONNECT";
  }
  return "UNKNOWN";
}

Result<AdmissionRequest> decodeAdmissionReview(std::string_view body, const DecodeOptions& options) {
  if (body.size() > options.maxBodyBytes) {
    Error e(ErrorCode::kBadRequest, "AdmissionReview: body of " + std::to_string(body.size()) +
                                        " bytes is above the limit of " + std::to_string(options.maxBodyBytes));
    e.httpStatus = 413;
    return e;
  }
  if (body.empty()) return decodeError("empty body");
  simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(padded).get(doc)) return jsonFailure("not JSON", e);
  od::value root;
  if (auto e = doc.get_value().get(root)) return jsonFailure("not JSON", e);

  AdmissionRequest out;
  std::string apiVersion, kind;
  bool requestSeen = false, operationSeen = false;
  auto s = forEachMember(root, "the review", [&](std::string_view key, od::value fv) -> Status {
    if (key == "apiVersion") return stringInto(fv, apiVersion, "apiVersion");
    if (key == "kind") return stringInto(fv, kind, "kind");
    if (key == "request") {
      requestSeen = true;
      return requestInto(fv, out, operationSeen);
    }
    return {};
  });
  if (!s) return s.error();
  const char* trailing = nullptr;
  if (doc.current_location().get(trailing) != simdjson::OUT_OF_BOUNDS) {
    return decodeError("content after the review's closing brace");
  }
  if (apiVersion != kApiVersion) {
    return decodeError("apiVersion is \"" + apiVersion + "\", expected \"" + std::string(kApiVersion) + "\"");
  }
  if (kind != kKind) return decodeError("kind is \"" + kind + "\", expected \"" + std::string(kKind) + "\"");
  if (!requestSeen) return decodeError("request is missing");
  if (auto valid = validateRequest(out, operationSeen); !valid) return valid.error();
  return out;
}

AdmissionRequest copyRequest(const AdmissionRequest& request) {
  auto padded = [](const simdjson::padded_string& json) {
    return simdjson::padded_string(std::string_view(json.data(), json.size()));
  };
  AdmissionRequest copy;
  copy.uid = request.uid;
  copy.kind = request.kind;
  copy.resource = request.resource;
  copy.subResource = request.subResource;
  copy.requestKind = request.requestKind;
  copy.requestResource = request.requestResource;
  copy.requestSubResource = request.requestSubResource;
  copy.name = request.name;
  copy.namespace_ = request.namespace_;
  copy.operation = request.operation;
  copy.userInfo = request.userInfo;
  copy.dryRun = request.dryRun;
  copy.object = padded(request.object);
  copy.oldObject = padded(request.oldObject);
  copy.options = padded(request.options);
  return copy;
}

AdmissionResponse AdmissionResponse::refuse(int code, std::string message, std::string reason) {
  AdmissionResponse r;
  r.allowed = false;
  r.code = code;
  r.message = std::move(message);
  r.reason = std::move(reason);
  return r;
}

AdmissionResponse AdmissionResponse::mutate(JsonPatch patch) {
  AdmissionResponse r;
  r.patch = std::move(patch);
  return r;
}

std::string base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string encodeAdmissionReview(std::string_view uid, const AdmissionResponse& response) {
  JsonWriter w;
  w.beginObject().field("apiVersion", kApiVersion).field("kind", kKind).key("response").beginObject();
  w.field("uid", uid).field("allowed", response.allowed);
  if (!response.allowed || !response.message.empty()) {
    w.key("status").beginObject();
    if (!response.allowed) w.field("code", static_cast<std::int64_t>(response.code > 0 ? response.code : 403));
    if (!response.message.empty()) w.field("message", response.message);
    if (!response.reason.empty()) w.field("reason", response.reason);
    w.endObject();
  }
  if (response.allowed && !response.patch.empty()) {
    w.field("patchType", "JSONPatch").field("patch", base64Encode(response.patch.toJson()));
  }
  if (!response.warnings.empty()) {
    w.key("warnings").beginArray();
    for (const auto& warning : response.warnings) w.value(warning);
    w.endArray();
  }
  if (!response.auditAnnotations.empty()) {
    w.key("auditAnnotations").beginObject();
    for (const auto& [k, v] : response.auditAnnotations) w.field(k, v);
    w.endObject();
  }
  w.endObject().endObject();
  return w.str();
}

}  // namespace tally::runtime::admission
