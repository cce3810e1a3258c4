#include "tally/runtime/lease.hpp"

#include "tally/common/proto_wire.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::runtime {
namespace {

namespace od = simdjson::ondemand;

std::string microTimeFromProto(std::string_view raw) {
  int64_t seconds = 0;
  int64_t nanos = 0;
  proto::Reader r(raw);
  while (r.next()) {
    if (r.field() == 1 && r.isVarint()) seconds = r.int64Value();
    if (r.field() == 2 && r.isVarint()) nanos = r.int64Value();
  }
  return formatMicroTime(
      std::chrono::system_clock::time_point(std::chrono::seconds(seconds)) +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(nanos)));
}

Status specJson(od::value v, Lease& lease) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "lease spec");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "lease spec");
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "lease spec");
    Status st;
    if (key == "holderIdentity")
      st = jsonStringInto(fv, lease.holderIdentity, "holderIdentity");
    else if (key == "acquireTime")
      st = jsonStringInto(fv, lease.acquireTime, "acquireTime");
    else if (key == "renewTime")
      st = jsonStringInto(fv, lease.renewTime, "renewTime");
    else if (key == "leaseDurationSeconds" || key == "leaseTransitions") {
      int64_t n = 0;
      if (auto e = fv.get_int64().get(n)) return jsonError(e, key);
      (key == "leaseTransitions" ? lease.leaseTransitions : lease.leaseDurationSeconds) = static_cast<int32_t>(n);
    }
    if (!st) return st;
  }
  return {};
}

}  // namespace

std::string formatMicroTime(std::chrono::system_clock::time_point t) { return formatRfc3339(toUnixTime(t), 6); }

Result<Lease> LeaseCodec::fromJson(od::value v) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "lease");
  Lease lease;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "lease");
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "lease");
    Status st;
    if (key == "metadata")
      st = fromMeta(decodeObjectMetaJson(fv, lease.metadata, kMetaCore));
    else if (key == "spec")
      st = specJson(fv, lease);
    if (!st) return std::move(st).error();
  }
  return lease;
}

Result<Lease> LeaseCodec::fromProtobuf(std::string_view raw) {
  Lease lease;
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) {
      if (auto st = decodeObjectMetaProtobuf(r.bytes(), lease.metadata, kMetaCore); !st) return metaError(st.error());
    } else if (r.field() == 2) {
      proto::Reader s(r.bytes());
      while (s.next()) {
        switch (s.field()) {
          case 1:
            if (s.isBytes()) lease.holderIdentity.assign(s.bytes());
            break;
          case 2:
            if (s.isVarint()) lease.leaseDurationSeconds = static_cast<int32_t>(s.int64Value());
            break;
          case 3:
            if (s.isBytes()) lease.acquireTime = microTimeFromProto(s.bytes());
            break;
          case 4:
            if (s.isBytes()) lease.renewTime = microTimeFromProto(s.bytes());
            break;
          case 5:
            if (s.isVarint()) lease.leaseTransitions = static_cast<int32_t>(s.int64Value());
            break;
          default: break;
        }
      }
      if (s.failed()) return Error(ErrorCode::kDecode, "malformed LeaseSpec");
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed Lease");
  return lease;
}

}  // namespace tally::runtime
