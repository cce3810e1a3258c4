#include <string>

#include "tally/common/object_meta_decode.hpp"
#include "tally/common/object_meta_protobuf.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally {
namespace {

namespace od = simdjson::ondemand;

MetaError jsonError(simdjson::error_code code, std::string field, std::string_view expected) {
  switch (code) {
    case simdjson::INCORRECT_TYPE: return {std::move(field), "expected " + std::string(expected)};
    case simdjson::NUMBER_OUT_OF_RANGE: return {std::move(field), "number out of range"};
    default: return {std::move(field), std::string("malformed JSON: ") + simdjson::error_message(code)};
  }
}

std::string under(std::string_view parent, std::string_view key) {
  std::string path(parent);
  path += '.';
  path += key;
  return path;
}

// null reads as "", false or absent, as Kubernetes writes omitted fields.
MetaStatus nullable(od::value& value, std::string_view field, bool& null) {
  if (auto code = value.is_null().get(null)) return jsonError(code, std::string(field), "a value");
  return {};
}

MetaStatus readString(od::value value, std::string_view field, std::string& out) {
  bool null = false;
  if (auto st = nullable(value, field, null); !st) return st;
  if (null) {
    out.clear();
    return {};
  }
  std::string_view text;
  if (auto code = value.get_string().get(text)) return jsonError(code, std::string(field), "a string");
  out.assign(text);
  return {};
}

// Calls f(key, value) for each member; null is an empty object.
template <class F>
MetaStatus forEachMember(od::value value, std::string_view field, F&& f) {
  bool null = false;
  if (auto st = nullable(value, field, null); !st || null) return st;
  od::object object;
  if (auto code = value.get_object().get(object)) return jsonError(code, std::string(field), "an object");
  for (auto entry : object) {
    od::field member;
    if (auto code = std::move(entry).get(member)) return jsonError(code, std::string(field), "an object");
    std::string_view key;
    if (auto code = member.unescaped_key().get(key)) return jsonError(code, std::string(field), "an object");
    if (auto st = f(key, member.value()); !st) return st;
  }
  return {};
}

MetaStatus readStringMap(od::value value, std::string_view field, StringPairs& out) {
  return forEachMember(value, field, [&](std::string_view key, od::value entry) -> MetaStatus {
    std::string_view text;
    if (auto code = entry.get_string().get(text)) {
      return jsonError(code, std::string(field) + "[" + std::string(key) + "]", "a string");
    }
    out.emplace_back(std::string(key), std::string(text));
    return {};
  });
}

MetaStatus readOwnerJson(od::value value, std::string_view field, OwnerRef& owner) {
  return forEachMember(value, field, [&](std::string_view key, od::value member) -> MetaStatus {
    if (key == "apiVersion") return readString(member, under(field, key), owner.apiVersion);
    if (key == "kind") return readString(member, under(field, key), owner.kind);
    if (key == "name") return readString(member, under(field, key), owner.name);
    if (key == "uid") return readString(member, under(field, key), owner.uid);
    if (key == "controller") {
      bool null = false;
      if (auto st = nullable(member, under(field, key), null); !st) return st;
      if (null) return {};
      if (auto code = member.get_bool().get(owner.controller))
        return jsonError(code, under(field, key), "true or false");
    }
    return {};
  });
}

MetaStatus readOwnersJson(od::value value, std::vector<OwnerRef>& out) {
  constexpr std::string_view kField = "metadata.ownerReferences";
  bool null = false;
  if (auto st = nullable(value, kField, null); !st || null) return st;
  od::array array;
  if (auto code = value.get_array().get(array)) return jsonError(code, std::string(kField), "an array");
  for (auto item : array) {
    const std::string field = std::string(kField) + "[" + std::to_string(out.size()) + "]";
    od::value element;
    if (auto code = std::move(item).get(element)) return jsonError(code, field, "a value");
    if (auto st = readOwnerJson(element, field, out.emplace_back()); !st) return st;
  }
  return {};
}

MetaStatus readFinalizersJson(od::value value, std::vector<std::string>& out) {
  constexpr std::string_view kField = "metadata.finalizers";
  bool null = false;
  if (auto st = nullable(value, kField, null); !st || null) return st;
  od::array array;
  if (auto code = value.get_array().get(array)) return jsonError(code, std::string(kField), "an array");
  for (auto item : array) {
    std::string_view text;
    if (auto code = item.get_string().get(text)) {
      return jsonError(code, std::string(kField) + "[" + std::to_string(out.size()) + "]", "a string");
    }
    out.emplace_back(text);
  }
  return {};
}

MetaStatus parseCreated(std::string_view text, std::int64_t& out) {
  if (text.empty()) return {};
  auto parsed = parseRfc3339(text);
  if (!parsed) return MetaError{"metadata.creationTimestamp", "\"" + std::string(text) + "\" is not RFC 3339"};
  out = parsed->seconds;
  return {};
}

}  // namespace

MetaStatus decodeObjectMetaJson(od::value json, ObjectMeta& out, unsigned parts) {
  return forEachMember(json, "metadata", [&](std::string_view key, od::value field) -> MetaStatus {
    if (key == "name") return readString(field, "metadata.name", out.name);
    if (key == "namespace") return readString(field, "metadata.namespace", out.ns);
    if (key == "uid") return readString(field, "metadata.uid", out.uid);
    if (key == "resourceVersion") return readString(field, "metadata.resourceVersion", out.resourceVersion);
    if (key == "generation") {
      bool null = false;
      if (auto st = nullable(field, "metadata.generation", null); !st || null) return st;
      if (auto code = field.get_int64().get(out.generation))
        return jsonError(code, "metadata.generation", "an integer");
      return {};
    }
    if (key == "deletionTimestamp") {
      bool null = false;
      if (auto st = nullable(field, "metadata.deletionTimestamp", null); !st) return st;
      out.deleting = !null;
      return {};
    }
    // Parts nobody asked for are skipped unread (on-demand skips them for free).
    if (key == "creationTimestamp" && (parts & kMetaCreated)) {
      std::string text;
      if (auto st = readString(field, "metadata.creationTimestamp", text); !st) return st;
      return parseCreated(text, out.created);
    }
    if (key == "labels" && (parts & kMetaLabels)) return readStringMap(field, "metadata.labels", out.labels);
    if (key == "annotations" && (parts & kMetaAnnotations)) {
      return readStringMap(field, "metadata.annotations", out.annotations);
    }
    if (key == "ownerReferences" && (parts & kMetaOwners)) return readOwnersJson(field, out.ownerReferences);
    if (key == "finalizers" && (parts & kMetaFinalizers)) return readFinalizersJson(field, out.finalizers);
    return {};
  });
}

MetaStatus decodeObjectMetaProtobuf(std::string_view message, ObjectMeta& out, unsigned parts) {
  return decodeObjectMetaProtobufOn<proto::Reader>(message, out, parts);
}

}  // namespace tally
