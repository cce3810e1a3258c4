#pragma once
// Built-in kinds from Kubernetes' protobuf encoding (the object message inside
// the k8s\0 + runtime.Unknown envelope, as a watch event or a list item carries
// it), straight into the model's values: the fields the model reads, the same
// rules as the JSON decoders, everything else skipped unread. Field numbers are
// those of k8s.io/api/core/v1 and k8s.io/apimachinery meta/v1 generated.proto.

#include <string_view>

#include "tally/codec/objects.hpp"
#include "tally/common/proto_wire.hpp"

namespace tally::codec {

Result<model::Node> decodeNodeProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::Pod> decodePodProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::Namespace> decodeNamespaceProtobuf(std::string_view message, ObjectMeta* meta = nullptr);
Result<model::ResourceQuota> decodeResourceQuotaProtobuf(std::string_view message, ObjectMeta* meta = nullptr);

// The same, into a value the caller made (default-constructed): what a watch
// decoder uses, so the value is built where it stays. On failure `out` is
// partly filled and should be dropped.
Status decodeNodeProtobuf(std::string_view message, model::Node& out, ObjectMeta* meta = nullptr);
Status decodePodProtobuf(std::string_view message, model::Pod& out, ObjectMeta* meta = nullptr);
Status decodeNamespaceProtobuf(std::string_view message, model::Namespace& out, ObjectMeta* meta = nullptr);
Status decodeResourceQuotaProtobuf(std::string_view message, model::ResourceQuota& out, ObjectMeta* meta = nullptr);

// The same decoders on a wire reader of the caller's choice. The forms above
// are these on proto::Reader, the reader the product ships; tally_codec_coded
// (codec/coded/) instantiates them on proto::CodedReader, libprotobuf's
// CodedInputStream, which the tests, a fuzz target and bench/decode compare
// the product against. Other readers are not instantiated.
template <proto::WireReader Reader>
Status decodeNodeProtobufOn(std::string_view message, model::Node& out, ObjectMeta* meta = nullptr);
template <proto::WireReader Reader>
Status decodePodProtobufOn(std::string_view message, model::Pod& out, ObjectMeta* meta = nullptr);
template <proto::WireReader Reader>
Status decodeNamespaceProtobufOn(std::string_view message, model::Namespace& out, ObjectMeta* meta = nullptr);
template <proto::WireReader Reader>
Status decodeResourceQuotaProtobufOn(std::string_view message, model::ResourceQuota& out, ObjectMeta* meta = nullptr);

}  // namespace tally::codec
