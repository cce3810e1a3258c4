// libFuzzer target: the product's protobuf decoders on the wire reader it
// ships (proto::Reader) and on libprotobuf's CodedInputStream
// (proto::CodedReader, tally/common/proto_coded_reader.hpp) must agree on
// every input: the same fields read by the readers themselves, the same
// envelope cut out of each watch frame, and for each built-in kind the same
// decoded value and identity, or the same error. Any difference traps. Seeds:
// codec/fuzz/watch-protobuf-corpus (the watch streams of every built-in kind;
// the first byte, the watch targets' piece selector, is skipped).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tally/codec/protobuf.hpp"
#include "tally/common/proto_coded_reader.hpp"
#include "tally/common/proto_wire.hpp"

using namespace tally;

namespace {

template <proto::WireReader Reader>
bool sameFields(std::string_view data) {
  Reader a(data);
  proto::CodedReader b(data);
  for (;;) {
    const bool more = a.next();
    if (more != b.next()) return false;
    if (!more) return a.failed() == b.failed();
    if (a.field() != b.field() || a.type() != b.type()) return false;
    if (a.isBytes() ? a.bytes() != b.bytes() : a.varintValue() != b.varintValue()) return false;
  }
}

// WatchEvent{object = 2: RawExtension{raw = 1}}, "k8s\0" + runtime.Unknown:
// the object message, as the watch decoder cuts it out.
template <proto::WireReader Reader>
std::optional<std::string_view> objectOf(std::string_view frame) {
  std::string_view raw;
  Reader event(frame);
  while (event.next()) {
    if (event.field() != 2 || !event.isBytes()) continue;
    Reader extension(event.bytes());
    while (extension.next()) {
      if (extension.field() == 1 && extension.isBytes()) raw = extension.bytes();
    }
    if (extension.failed()) return std::nullopt;
  }
  if (event.failed()) return std::nullopt;
  proto::Unknown envelope;
  if (!proto::parseEnvelope<Reader>(raw, envelope)) return std::nullopt;
  return envelope.raw;
}

template <class T>
using DecodeInto = codec::Status (*)(std::string_view, T&, codec::ObjectMeta*);

template <class T>
void sameDecode(std::string_view message, DecodeInto<T> shipped, DecodeInto<T> library) {
  T a, b;
  codec::ObjectMeta metaA, metaB;
  const codec::Status readA = shipped(message, a, &metaA), readB = library(message, b, &metaB);
  if (static_cast<bool>(readA) != static_cast<bool>(readB) || !(metaA == metaB)) __builtin_trap();
  if (readA ? !(a == b) : readA.error().describe() != readB.error().describe()) __builtin_trap();
}

void sameObjects(std::string_view message) {
  sameDecode<model::Pod>(message, codec::decodePodProtobufOn<proto::Reader>,
                         codec::decodePodProtobufOn<proto::CodedReader>);
  sameDecode<model::Node>(message, codec::decodeNodeProtobufOn<proto::Reader>,
                          codec::decodeNodeProtobufOn<proto::CodedReader>);
  sameDecode<model::Namespace>(message, codec::decodeNamespaceProtobufOn<proto::Reader>,
                               codec::decodeNamespaceProtobufOn<proto::CodedReader>);
  sameDecode<model::ResourceQuota>(message, codec::decodeResourceQuotaProtobufOn<proto::Reader>,
                                   codec::decodeResourceQuotaProtobufOn<proto::CodedReader>);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  std::string_view data(reinterpret_cast<const char*>(bytes + 1), size - 1);
  if (!sameFields<proto::Reader>(data)) __builtin_trap();
  sameObjects(data);          // the input as one object message
  while (data.size() >= 4) {  // and as a watch stream
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    if (len > data.size() - 4) break;
    const std::string_view frame = data.substr(4, len);
    const auto a = objectOf<proto::Reader>(frame), b = objectOf<proto::CodedReader>(frame);
    if (a != b) __builtin_trap();
    if (a) sameObjects(*a);
    data.remove_prefix(4 + len);
  }
  return 0;
}
