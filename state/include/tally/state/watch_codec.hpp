#pragma once
// The codec adapter the state's informers decode every watched kind with:
// runtime::Informer<WatchCodec<codec::NodeCodec>> and so on, for each kind of
// the registry (kinds.hpp) and the ledger ConfigMap. A header of its own so
// that the fuzz targets (codec/fuzz/state_watch_*_fuzzer.cpp) run the bytes of
// a watch or a LIST through exactly what the informers run.

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/codec/objects.hpp"
#include "tally/runtime/codec.hpp"

namespace tally::state {

// A decoded object with the identity the informer's store needs (the model's
// types carry no resourceVersion).
template <class Codec>
struct Keyed {
  typename Codec::Object value;
  std::string ns, name, resourceVersion;
};

// All the informer's store keeps of an object: its handlers hand the value to
// the writer, the one place that holds it; a relist needs the keys and
// resourceVersions only, a deletion the name.
struct Identity {
  std::string ns, name, resourceVersion;
};

// Declared for every codec; only the billing-plans ConfigMap, which needs its
// identity before its data, defines and uses it.
template <class Codec>
codec::Result<typename Codec::Object> decodeWatched(std::string_view raw, const Keyed<Codec>& identity);

// The billing-plans informer lists only the ConfigMap --billing-plans names
// (its namespace and a metadata.name selector), and codecs carry no
// configuration: the ConfigMap it delivers is decoded as the catalogue at its
// own location.
template <>
inline codec::Result<std::optional<model::BillingPlans>> decodeWatched<codec::BillingPlansCodec>(
    std::string_view raw, const Keyed<codec::BillingPlansCodec>& identity) {
  const codec::BillingPlansLocation location{identity.ns, identity.name};
  std::optional<model::BillingPlans> plans;
  codec::Status status = codec::withJsonValue(raw, "", [&](simdjson::ondemand::value json) -> codec::Status {
    auto decoded = codec::decodeBillingPlansConfigMap(json, nullptr, location);
    if (!decoded) return std::move(decoded).error();
    plans = std::move(decoded).value();
    return {};
  });
  if (!status) return std::move(status).error();
  return plans;
}

// Adapts a codec::*Codec to the runtime's JsonCodec: reads metadata, then hands
// the object's text to the same decoder tallyctl and the controller use.
template <class Codec>
struct WatchCodec {
  using Object = Keyed<Codec>;

  // One pass: the codec reads the object and hands back its metadata. Only the
  // billing-plans ConfigMap needs its identity before its data (see above).
  static runtime::Result<Object> fromJson(simdjson::ondemand::value json) {
    if constexpr (std::is_same_v<Codec, codec::BillingPlansCodec>) {
      return fromJsonIdentityFirst(json);
    } else {
      codec::ObjectMeta meta;
      auto decoded = Codec::fromJson(json, &meta);  // fills meta: decode first, then take it
      return keyed(std::move(decoded), meta);
    }
  }

  static runtime::Result<Object> fromJsonIdentityFirst(simdjson::ondemand::value json) {
    Object out;
    simdjson::ondemand::object object;
    if (auto e = json.get_object().get(object)) return runtime::jsonError(e, std::string(Codec::kKind));
    for (auto entry : object) {
      simdjson::ondemand::field member;
      if (auto e = std::move(entry).get(member)) return runtime::jsonError(e, std::string(Codec::kKind));
      std::string_view key;
      if (auto e = member.unescaped_key().get(key)) return runtime::jsonError(e, std::string(Codec::kKind));
      if (key != "metadata") continue;
      simdjson::ondemand::object meta;
      if (auto e = member.value().get_object().get(meta)) return runtime::jsonError(e, "metadata");
      for (auto metaEntry : meta) {
        simdjson::ondemand::field f;
        if (auto e = std::move(metaEntry).get(f)) return runtime::jsonError(e, "metadata");
        std::string_view k;
        if (auto e = f.unescaped_key().get(k)) return runtime::jsonError(e, "metadata");
        std::string* target = k == "namespace"         ? &out.ns
                              : k == "name"            ? &out.name
                              : k == "resourceVersion" ? &out.resourceVersion
                                                       : nullptr;
        if (!target) continue;
        std::string_view v;
        if (auto e = f.value().get_string().get(v)) return runtime::jsonError(e, "metadata." + std::string(k));
        target->assign(v);
      }
    }
    if (auto e = object.reset().error()) return runtime::jsonError(e, std::string(Codec::kKind));
    std::string_view raw;
    if (auto e = object.raw_json().get(raw)) return runtime::jsonError(e, std::string(Codec::kKind));
    auto decoded = decodeWatched<Codec>(raw, out);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    out.value = std::move(decoded).value();
    return out;
  }
  // Built-in kinds arrive as protobuf when the server sends it (the watch asks
  // for it first): one decode, straight into the model's value.
  static runtime::Result<Object> fromProtobuf(std::string_view message) requires requires {
    Codec::fromProtobuf(message, nullptr);
  }
  {
    codec::ObjectMeta meta;
    auto decoded = Codec::fromProtobuf(message, &meta);  // fills meta: decode first, then take it
    return keyed(std::move(decoded), meta);
  }
  // The same, straight into the watch event's object (runtime::ProtobufIntoCodec).
  static runtime::Status fromProtobuf(std::string_view message, Object& out) requires requires {
    Codec::fromProtobuf(message, out.value, nullptr);
  }
  {
    codec::ObjectMeta meta;
    if (auto decoded = Codec::fromProtobuf(message, out.value, &meta); !decoded) {
      return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    }
    out.ns = std::move(meta.ns);
    out.name = std::move(meta.name);
    out.resourceVersion = std::move(meta.resourceVersion);
    return {};
  }
  static runtime::Result<Object> keyed(codec::Result<typename Codec::Object> decoded, codec::ObjectMeta& meta) {
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    return Object{std::move(decoded).value(), std::move(meta.ns), std::move(meta.name),
                  std::move(meta.resourceVersion)};
  }
  static std::string key(const Object& o) { return runtime::namespacedKey(o.ns, o.name); }
  static std::string_view resourceVersion(const Object& o) { return o.resourceVersion; }

  using Stored = Identity;
  static Stored stored(const Object& o) { return {o.ns, o.name, o.resourceVersion}; }
  static std::string_view resourceVersion(const Stored& s) { return s.resourceVersion; }
};

// A GPUDevice read back for a pinned write (GET, PATCH and LIST answers): the
// device with the metadata and conditions the binder and the VM door write
// on (codec::decodeGpuDeviceRecord).
struct GpuDeviceRecordCodec {
  using Object = codec::GpuDeviceRecord;
  static runtime::Result<Object> fromJson(simdjson::ondemand::value json) {
    auto decoded = codec::decodeGpuDeviceRecord(json);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    return std::move(decoded).value();
  }
  static std::string key(const Object& o) { return o.meta.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.meta.resourceVersion; }
};

}  // namespace tally::state
