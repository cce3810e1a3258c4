#include "tally/runtime/object_meta.hpp"

#include "tally/common/proto_wire.hpp"

namespace tally::runtime {

Status jsonStringInto(simdjson::ondemand::value v, std::string& out, std::string_view what) {
  std::string_view s;
  if (auto e = v.get_string().get(s)) {
    bool isNull = false;
    if (!v.is_null().get(isNull) && isNull) return {};
    return jsonError(e, what);
  }
  out.assign(s);
  return {};
}

Status jsonStringMapInto(simdjson::ondemand::value v, StringPairs& out, std::string_view what) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) {
    bool isNull = false;
    if (!v.is_null().get(isNull) && isNull) return {};
    return jsonError(e, what);
  }
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, what);
    std::string k(key);
    std::string_view value;
    if (auto e = field.value().get_string().get(value)) return jsonError(e, what);
    out.emplace_back(std::move(k), std::string(value));
  }
  return {};
}

namespace {

Status decodeOwnerJson(simdjson::ondemand::value v, OwnerRef& ref) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "ownerReference");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "ownerReference");
    simdjson::ondemand::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "ownerReference");
    Status st;
    if (key == "apiVersion")
      st = jsonStringInto(fv, ref.apiVersion, "ownerReference.apiVersion");
    else if (key == "kind")
      st = jsonStringInto(fv, ref.kind, "ownerReference.kind");
    else if (key == "name")
      st = jsonStringInto(fv, ref.name, "ownerReference.name");
    else if (key == "uid")
      st = jsonStringInto(fv, ref.uid, "ownerReference.uid");
    else if (key == "controller") {
      bool b = false;
      if (auto e = fv.get_bool().get(b)) return jsonError(e, "ownerReference.controller");
      ref.controller = b;
    }
    if (!st) return st;
  }
  return {};
}

}  // namespace

Status decodeObjectMetaJson(simdjson::ondemand::value v, ObjectMeta& out, unsigned parts) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "metadata");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "metadata");
    simdjson::ondemand::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "metadata");
    Status st;
    if (key == "name")
      st = jsonStringInto(fv, out.name, "metadata.name");
    else if (key == "namespace")
      st = jsonStringInto(fv, out.namespace_, "metadata.namespace");
    else if (key == "uid")
      st = jsonStringInto(fv, out.uid, "metadata.uid");
    else if (key == "resourceVersion")
      st = jsonStringInto(fv, out.resourceVersion, "metadata.resourceVersion");
    else if (key == "generation") {
      int64_t g = 0;
      if (auto e = fv.get_int64().get(g)) return jsonError(e, "metadata.generation");
      out.generation = g;
    } else if (key == "deletionTimestamp") {
      bool isNull = false;
      if (auto e = fv.is_null().get(isNull)) return jsonError(e, "metadata.deletionTimestamp");
      out.deleting = !isNull;
    } else if (key == "labels" && (parts & kMetaLabels)) {
      st = jsonStringMapInto(fv, out.labels, "metadata.labels");
    } else if (key == "annotations" && (parts & kMetaAnnotations)) {
      st = jsonStringMapInto(fv, out.annotations, "metadata.annotations");
    } else if (key == "ownerReferences" && (parts & kMetaOwners)) {
      simdjson::ondemand::array arr;
      if (auto e = fv.get_array().get(arr)) return jsonError(e, "metadata.ownerReferences");
      for (auto item : arr) {
        simdjson::ondemand::value iv;
        if (auto e = item.get(iv)) return jsonError(e, "metadata.ownerReferences");
        OwnerRef ref;
        if (auto s = decodeOwnerJson(iv, ref); !s) return s;
        out.ownerReferences.push_back(std::move(ref));
      }
    }
    if (!st) return st;
  }
  return {};
}

Status protoStringPairInto(std::string_view entry, StringPairs& out, bool valueIsQuantity) {
  proto::Reader r(entry);
  std::string_view key;
  std::string_view value;
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) key = r.bytes();
    if (r.field() == 2) {
      if (!valueIsQuantity) {
        value = r.bytes();
      } else {
        proto::Reader q(r.bytes());  // resource.Quantity{string = 1}
        while (q.next()) {
          if (q.field() == 1 && q.isBytes()) value = q.bytes();
        }
        if (q.failed()) return Error(ErrorCode::kDecode, "malformed Quantity");
      }
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed map entry");
  out.emplace_back(std::string(key), std::string(value));
  return {};
}

Status decodeObjectMetaProtobuf(std::string_view raw, ObjectMeta& out, unsigned parts) {
  proto::Reader r(raw);
  while (r.next()) {
    const bool bytes = r.isBytes();
    switch (r.field()) {
      case 1:
        if (bytes) out.name.assign(r.bytes());
        break;
      case 3:
        if (bytes) out.namespace_.assign(r.bytes());
        break;
      case 5:
        if (bytes) out.uid.assign(r.bytes());
        break;
      case 6:
        if (bytes) out.resourceVersion.assign(r.bytes());
        break;
      case 7:
        if (r.isVarint()) out.generation = r.int64Value();
        break;
      case 9: out.deleting = true; break;
      case 11:
        if (bytes && (parts & kMetaLabels)) {
          if (auto st = protoStringPairInto(r.bytes(), out.labels, false); !st) return st;
        }
        break;
      case 12:
        if (bytes && (parts & kMetaAnnotations)) {
          if (auto st = protoStringPairInto(r.bytes(), out.annotations, false); !st) return st;
        }
        break;
      case 13: {
        if (!bytes || !(parts & kMetaOwners)) break;
        OwnerRef ref;
        proto::Reader o(r.bytes());
        while (o.next()) {
          switch (o.field()) {
            case 1:
              if (o.isBytes()) ref.kind.assign(o.bytes());
              break;
            case 3:
              if (o.isBytes()) ref.name.assign(o.bytes());
              break;
            case 4:
              if (o.isBytes()) ref.uid.assign(o.bytes());
              break;
            case 5:
              if (o.isBytes()) ref.apiVersion.assign(o.bytes());
              break;
            case 6:
              if (o.isVarint()) ref.controller = o.varintValue() != 0;
              break;
            default: break;
          }
        }
        if (o.failed()) return Error(ErrorCode::kDecode, "malformed OwnerReference");
        out.ownerReferences.push_back(std::move(ref));
        break;
      }
      default: break;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed ObjectMeta");
  return {};
}

Result<MetaObject> MetaCodec::fromJson(simdjson::ondemand::value v) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "object");
  MetaObject out;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "object");
    if (key != "metadata") continue;
    simdjson::ondemand::value mv;
    if (auto e = field.value().get(mv)) return jsonError(e, "metadata");
    if (auto st = decodeObjectMetaJson(mv, out.metadata); !st) return std::move(st).error();
  }
  return out;
}

Result<MetaObject> MetaCodec::fromProtobuf(std::string_view raw) {
  MetaObject out;
  proto::Reader r(raw);
  while (r.next()) {
    if (r.field() == 1 && r.isBytes()) {
      if (auto st = decodeObjectMetaProtobuf(r.bytes(), out.metadata); !st) return std::move(st).error();
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed object");
  return out;
}

}  // namespace tally::runtime
