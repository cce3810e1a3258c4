#pragma once
// One codec type per kind, the shape an informer takes as its template
// argument: the object type it caches, the kind it watches, and fromJson.

#include <string_view>
#include <vector>

#include "tally/codec/dra_objects.hpp"
#include "tally/codec/objects.hpp"
#include "tally/codec/protobuf.hpp"

namespace tally::codec {

// The members every codec has: the object type, the kind, and fromJson.
#define TALLY_CODEC_MEMBERS(ObjectType, KindName, Decoder)                                     \
  using Object = ObjectType;                                                                   \
  static constexpr std::string_view kKind = KindName;                                          \
  static Result<Object> fromJson(simdjson::ondemand::value json, ObjectMeta* meta = nullptr) { \
    return Decoder(json, meta);                                                                \
  }

#define TALLY_CODEC_KIND(CodecName, ObjectType, KindName, Decoder) \
  struct CodecName {                                               \
    TALLY_CODEC_MEMBERS(ObjectType, KindName, Decoder)             \
  };

// Built-in kinds are also read from Kubernetes' protobuf encoding.
#define TALLY_CODEC_BUILTIN_KIND(CodecName, ObjectType, KindName, Decoder, ProtobufDecoder)         \
  struct CodecName {                                                                                \
    TALLY_CODEC_MEMBERS(ObjectType, KindName, Decoder)                                              \
    static Result<Object> fromProtobuf(std::string_view message, ObjectMeta* meta = nullptr) {      \
      return ProtobufDecoder(message, meta);                                                        \
    }                                                                                               \
    static Status fromProtobuf(std::string_view message, Object& out, ObjectMeta* meta = nullptr) { \
      return ProtobufDecoder(message, out, meta);                                                   \
    }                                                                                               \
  };

TALLY_CODEC_BUILTIN_KIND(NodeCodec, model::Node, "Node", decodeNode, decodeNodeProtobuf)
TALLY_CODEC_BUILTIN_KIND(PodCodec, model::Pod, "Pod", decodePod, decodePodProtobuf)
TALLY_CODEC_BUILTIN_KIND(NamespaceCodec, model::Namespace, "Namespace", decodeNamespace, decodeNamespaceProtobuf)
TALLY_CODEC_KIND(HierarchicalResourceQuotaCodec, model::HierarchicalResourceQuota, "HierarchicalResourceQuota",
                 decodeHierarchicalResourceQuota)
TALLY_CODEC_BUILTIN_KIND(ResourceQuotaCodec, model::ResourceQuota, "ResourceQuota", decodeResourceQuota,
                         decodeResourceQuotaProtobuf)
TALLY_CODEC_KIND(DeviceClassCodec, model::DeviceClass, "GPUDeviceClass", decodeDeviceClass)
TALLY_CODEC_KIND(GpuDeviceCodec, model::GpuDevice, "GPUDevice", decodeGpuDevice)
TALLY_CODEC_KIND(VirtualMachineInstanceCodec, model::VirtualMachineInstance, "VirtualMachineInstance",
                 decodeVirtualMachineInstance)
TALLY_CODEC_KIND(OrganizationCodec, model::Organization, "Organization", decodeOrganization)
TALLY_CODEC_KIND(KubeVirtCodec, std::vector<model::PermittedHostDevice>, "KubeVirt", decodeKubeVirt)
TALLY_CODEC_KIND(BillingPlansCodec, std::optional<model::BillingPlans>, "ConfigMap", decodeBillingPlansConfigMap)
// resource.k8s.io/v1, watched as JSON (no protobuf decoders for them yet).
TALLY_CODEC_KIND(ResourceSliceCodec, model::ResourceSlice, "ResourceSlice", decodeResourceSlice)
TALLY_CODEC_KIND(ResourceClaimCodec, model::ResourceClaim, "ResourceClaim", decodeResourceClaim)
TALLY_CODEC_KIND(DeviceTaintRuleCodec, model::DeviceTaintRule, "DeviceTaintRule", decodeDeviceTaintRule)

#undef TALLY_CODEC_MEMBERS
#undef TALLY_CODEC_KIND
#undef TALLY_CODEC_BUILTIN_KIND

}  // namespace tally::codec
