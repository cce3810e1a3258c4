#pragma once
// The codecs in the shape the runtime's informers take (tally/runtime/codec.hpp):
// each cached object is the model value together with the identity the
// informer's store keys and resumes by. Header-only, so tally_codec itself does
// not depend on the runtime; include it where the runtime is linked.

#include <string>
#include <string_view>
#include <utility>

#include "tally/codec/codecs.hpp"
#include "tally/runtime/codec.hpp"

namespace tally::codec {

template <class T>
struct Cached {
  ObjectMeta meta;
  T object;
};

template <class Codec>
struct InformerCodec {
  using Object = Cached<typename Codec::Object>;

  static runtime::Result<Object> fromJson(simdjson::ondemand::value json) {
    Object cached;
    auto decoded = Codec::fromJson(json, &cached.meta);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    cached.object = std::move(decoded).value();
    return cached;
  }
  static runtime::Result<Object> fromProtobuf(std::string_view message) requires requires {
    Codec::fromProtobuf(message, nullptr);
  }
  {
    Object cached;
    auto decoded = Codec::fromProtobuf(message, &cached.meta);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    cached.object = std::move(decoded).value();
    return cached;
  }
  // Straight into the watch event's object: the decoder fills both halves in place.
  static runtime::Status fromProtobuf(std::string_view message, Object& out) requires requires {
    Codec::fromProtobuf(message, out.object, nullptr);
  }
  {
    if (auto decoded = Codec::fromProtobuf(message, out.object, &out.meta); !decoded) {
      return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    }
    return {};
  }
  static std::string key(const Object& o) { return runtime::namespacedKey(o.meta.ns, o.meta.name); }
  static std::string_view resourceVersion(const Object& o) { return o.meta.resourceVersion; }
};

using NodeInformerCodec = InformerCodec<NodeCodec>;
using PodInformerCodec = InformerCodec<PodCodec>;
using NamespaceInformerCodec = InformerCodec<NamespaceCodec>;
using HierarchicalResourceQuotaInformerCodec = InformerCodec<HierarchicalResourceQuotaCodec>;
using ResourceQuotaInformerCodec = InformerCodec<ResourceQuotaCodec>;
using DeviceClassInformerCodec = InformerCodec<DeviceClassCodec>;
using GpuDeviceInformerCodec = InformerCodec<GpuDeviceCodec>;
using VirtualMachineInstanceInformerCodec = InformerCodec<VirtualMachineInstanceCodec>;
using OrganizationInformerCodec = InformerCodec<OrganizationCodec>;
using KubeVirtInformerCodec = InformerCodec<KubeVirtCodec>;
using BillingPlansInformerCodec = InformerCodec<BillingPlansCodec>;

}  // namespace tally::codec
