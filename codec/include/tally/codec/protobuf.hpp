#pragma once
// Built-in kinds from Kubernetes' protobuf encoding (the object message inside
// the k8s\0 + runtime.Unknown envelope, as a watch event or a list item carries
// it), straight into the model's values: the fields the model reads, the same
// rules as the JSON decoders, everything else skipped unread. Field numbers are
// those of k8s.io/api/core/v1 and k8s.io/apimachinery meta/v1 generated.proto.

#include <string_view>

#include "tally/codec/objects.hpp"

namespace tally::codec {

Result<model::Node> decodeNodeProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::Pod> decodePodProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::Namespace> decodeNamespaceProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::ResourceQuota> decodeResourceQuotaProtobuf(std::string_view message, ObjectMeta* meta = nullptr);

}  // namespace tally::codec
