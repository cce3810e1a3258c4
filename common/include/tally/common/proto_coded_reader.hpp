#pragma once
// The wire reader's interface (proto_wire.hpp) on libprotobuf's own parser:
// google::protobuf::io::CodedInputStream reads the tags, varints, fixed values
// and lengths, WireFormatLite splits the tags. The product's decoders run on
// either reader (they take it as a template parameter); this one is the
// reference they are checked against (codec's tests and fuzz target) and the
// other side of bench/decode's comparison. Link libprotobuf to use it.
//
// Where libprotobuf is more lenient than the wire reader, the wire reader's
// refusals are added on top, so that both readers end a walk on the same
// bytes: a tag beyond 32 bits (ReadTag would truncate it, so tags and lengths
// are read as 64-bit varints) and a ten-byte varint whose last byte carries
// more than bit 64 (the library drops those bits).

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>
#include <cstdint>
#include <string_view>

#include "tally/common/proto_wire.hpp"

namespace tally::proto {

class CodedReader {
 public:
  // CodedInputStream counts in int: a larger input (beyond any frame the
  // watch decoder accepts) is refused as a whole.
  explicit CodedReader(std::string_view data)
      : in_(reinterpret_cast<const uint8_t*>(data.data()),
            data.size() > static_cast<size_t>(INT_MAX) ? 0 : static_cast<int>(data.size())),
        failed_(data.size() > static_cast<size_t>(INT_MAX)) {}

  bool next() {
    using google::protobuf::internal::WireFormatLite;
    if (failed_ || in_.ExpectAtEnd()) return false;
    uint64_t tag;
    if (!readVarint(tag) || tag > 0xffffffffu) return fail();
    field_ = static_cast<uint32_t>(WireFormatLite::GetTagFieldNumber(static_cast<uint32_t>(tag)));
    type_ = static_cast<uint8_t>(WireFormatLite::GetTagWireType(static_cast<uint32_t>(tag)));
    if (field_ == 0) return fail();
    switch (type_) {
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint64_t len;
        if (!readVarint(len)) return fail();
        const void* at;
        int left;
        in_.GetDirectBufferPointerInline(&at, &left);
        if (len > static_cast<uint64_t>(left)) return fail();
        bytes_ = std::string_view(static_cast<const char*>(at), static_cast<size_t>(len));
        in_.Skip(static_cast<int>(len));
        return true;
      }
      case WireFormatLite::WIRETYPE_VARINT:
        if (!readVarint(value_)) return fail();
        return true;
      case WireFormatLite::WIRETYPE_FIXED64:
        if (!in_.ReadLittleEndian64(&value_)) return fail();
        return true;
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t v;
        if (!in_.ReadLittleEndian32(&v)) return fail();
        value_ = v;
        return true;
      }
      default:  // groups, as the wire reader: Kubernetes does not use them
        return fail();
    }
  }

  uint32_t field() const { return field_; }
  uint8_t type() const { return type_; }
  bool failed() const { return failed_; }
  bool isBytes() const { return type_ == kBytes; }
  bool isVarint() const { return type_ == kVarint; }
  std::string_view bytes() const { return bytes_; }
  uint64_t varintValue() const { return value_; }
  int64_t int64Value() const { return static_cast<int64_t>(value_); }

 private:
  bool fail() {
    failed_ = true;
    return false;
  }
  // ReadVarint64, refusing what the library would accept by dropping bits.
  bool readVarint(uint64_t& out) {
    const void* before;
    int size;
    in_.GetDirectBufferPointerInline(&before, &size);
    if (!in_.ReadVarint64(&out)) return false;
    const void* after;
    in_.GetDirectBufferPointerInline(&after, &size);
    const auto* first = static_cast<const uint8_t*>(before);
    return static_cast<const uint8_t*>(after) - first < 10 || first[9] <= 1;
  }

  google::protobuf::io::CodedInputStream in_;
  std::string_view bytes_;
  uint64_t value_ = 0;
  uint32_t field_ = 0;
  uint8_t type_ = 0;
  bool failed_ = false;
};

static_assert(WireReader<CodedReader>);

}  // namespace tally::proto
