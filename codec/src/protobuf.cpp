#include "tally/codec/protobuf.hpp"

#include "protobuf_decoders.hpp"

namespace tally::codec {

TALLY_CODEC_PROTOBUF_DECODERS_ON(proto::Reader)

namespace {

// The value-returning forms: a fresh value, decoded in place, handed back.
template <class T>
Result<T> decodedValue(std::string_view message, ObjectMeta* meta,
                       Status (*decode)(std::string_view, T&, ObjectMeta*)) {
  T value;
  if (Status read = decode(message, value, meta); !read) return std::move(read).error();
  return value;
}

}  // namespace

Status decodeNodeProtobuf(std::string_view message, model::Node& out, ObjectMeta* meta) {
  return decodeNodeProtobufOn<proto::Reader>(message, out, meta);
}
Status decodePodProtobuf(std::string_view message, model::Pod& out, ObjectMeta* meta) {
  return decodePodProtobufOn<proto::Reader>(message, out, meta);
}
Status decodeNamespaceProtobuf(std::string_view message, model::Namespace& out, ObjectMeta* meta) {
  return decodeNamespaceProtobufOn<proto::Reader>(message, out, meta);
}
Status decodeResourceQuotaProtobuf(std::string_view message, model::ResourceQuota& out, ObjectMeta* meta) {
  return decodeResourceQuotaProtobufOn<proto::Reader>(message, out, meta);
}

Result<model::Pod> decodePodProtobuf(std::string_view message, ObjectMeta* meta) {
  return decodedValue<model::Pod>(message, meta, decodePodProtobuf);
}
Result<model::Node> decodeNodeProtobuf(std::string_view message, ObjectMeta* meta) {
  return decodedValue<model::Node>(message, meta, decodeNodeProtobuf);
}
Result<model::Namespace> decodeNamespaceProtobuf(std::string_view message, ObjectMeta* meta) {
  return decodedValue<model::Namespace>(message, meta, decodeNamespaceProtobuf);
}
Result<model::ResourceQuota> decodeResourceQuotaProtobuf(std::string_view message, ObjectMeta* meta) {
  return decodedValue<model::ResourceQuota>(message, meta, decodeResourceQuotaProtobuf);
}

}  // namespace tally::codec
