#include "tally/runtime/object_meta.hpp"

#include "tally/common/proto_wire.hpp"

namespace tally::runtime {

Error metaError(const MetaError& error) { return Error(ErrorCode::kDecode, error.describe()); }

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
    if (auto st = decodeObjectMetaJson(mv, out.metadata); !st) return metaError(st.error());
  }
  return out;
}

Result<MetaObject> MetaCodec::fromProtobuf(std::string_view raw) {
  MetaObject out;
  proto::Reader r(raw);
  while (r.next()) {
    if (r.field() == 1 && r.isBytes()) {
      if (auto st = decodeObjectMetaProtobuf(r.bytes(), out.metadata); !st) return metaError(st.error());
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed object");
  return out;
}

}  // namespace tally::runtime
