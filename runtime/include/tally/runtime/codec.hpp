#pragma once
// What an informer needs to know about an object type. The caller supplies a
// codec that decodes straight into its own value type:
//
//   struct PodCodec {
//     using Object = SlimPod;
//     static Result<Object> fromJson(simdjson::ondemand::value object);
//     static Result<Object> fromProtobuf(std::string_view message);  // optional
//     static Status fromProtobuf(std::string_view message, Object& out);  // optional, faster
//     static std::string key(const Object&);                // "ns/name" or "name"
//     static std::string_view resourceVersion(const Object&);
//   };
//
// A codec may also name a smaller `Stored` value for the store to keep
// (ProjectingCodec below).
//
// fromJson receives the "object" value of a watch event or one list item;
// fromProtobuf receives runtime.Unknown.raw, i.e. the bytes of the typed
// message (a Pod), without the k8s\0 envelope. Decoders must not keep the
// simdjson document or the bytes beyond the call.

#include <simdjson.h>

#include <concepts>
#include <string>
#include <string_view>

#include "tally/runtime/result.hpp"

namespace tally::runtime {

// The simdjson kernel compiled into this build's on-demand decoders ("haswell",
// "icelake", "westmere", "fallback"; their structural scan is dispatched at
// run time regardless): fixed by the flags of TALLY_SIMD, so a build that meant
// AVX2 and got the fallback shows here.
inline constexpr std::string_view kJsonKernel = SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION);

template <class C>
concept JsonCodec = requires(simdjson::ondemand::value v, const typename C::Object& o) {
  typename C::Object;
  { C::fromJson(v) } -> std::same_as<Result<typename C::Object>>;
  { C::key(o) } -> std::convertible_to<std::string>;
  { C::resourceVersion(o) } -> std::convertible_to<std::string_view>;
};

// A codec whose decoded Object carries more than its informer's store needs
// to keep names what the store keeps instead: `Stored`, made from each decoded
// object by `stored`, with its own resourceVersion (the relist compares it).
// The state informers keep identity and resourceVersion only: their handlers
// hand each decoded value to the writer, which is the one that holds it.
template <class C>
concept ProjectingCodec = JsonCodec<C> && requires(const typename C::Object& o, const typename C::Stored& s) {
  typename C::Stored;
  { C::stored(o) } -> std::same_as<typename C::Stored>;
  { C::resourceVersion(s) } -> std::convertible_to<std::string_view>;
};

// What a store keeps of each object of codec C.
template <class C>
struct StoredOf {
  using type = typename C::Object;
};
template <ProjectingCodec C>
struct StoredOf<C> {
  using type = typename C::Stored;
};

template <class C>
concept ProtobufCodec = JsonCodec<C> && requires(std::string_view raw) {
  { C::fromProtobuf(raw) } -> std::same_as<Result<typename C::Object>>;
};

// A protobuf codec may also decode into an object the caller made (the watch
// event's): a pod is a dozen strings and vectors, and handing it back by value
// through Result, the cached wrapper and the event moves each of them several
// times per event. On failure the object is left partly filled.
template <class C>
concept ProtobufIntoCodec = ProtobufCodec<C> && requires(std::string_view raw, typename C::Object& out) {
  { C::fromProtobuf(raw, out) } -> std::same_as<Status>;
};

inline Error jsonError(simdjson::error_code e, std::string_view what) {
  return Error(ErrorCode::kDecode, std::string(what) + ": " + simdjson::error_message(e));
}

// "namespace/name" for namespaced objects, "name" otherwise (client-go's
// MetaNamespaceKeyFunc).
inline std::string namespacedKey(std::string_view ns, std::string_view name) {
  if (ns.empty()) return std::string(name);
  std::string k;
  k.reserve(ns.size() + 1 + name.size());
  k.append(ns).append("/").append(name);
  return k;
}

}  // namespace tally::runtime
