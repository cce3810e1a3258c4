#pragma once
// A bounds-checked reader for the protobuf wire format. Decoders walk the
// fields they need and skip the rest without materialising them; any
// malformed input ends the walk with an error instead of reading past the end.

#include <concepts>
#include <cstdint>
#include <string_view>

namespace tally::proto {

enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// What a decoder asks of a wire reader. Reader below is the one the product
// ships; CodedReader (proto_coded_reader.hpp) is the same on libprotobuf's
// CodedInputStream. Decoders that take the reader as a template parameter run
// on either, so the two can be compared on the same bytes.
template <class R>
concept WireReader = std::constructible_from<R, std::string_view> && requires(R r, const R c) {
  { r.next() } -> std::same_as<bool>;
  { c.field() } -> std::same_as<uint32_t>;
  { c.type() } -> std::same_as<uint8_t>;
  { c.failed() } -> std::same_as<bool>;
  { c.isBytes() } -> std::same_as<bool>;
  { c.isVarint() } -> std::same_as<bool>;
  { c.bytes() } -> std::same_as<std::string_view>;
  { c.varintValue() } -> std::same_as<uint64_t>;
  { c.int64Value() } -> std::same_as<int64_t>;
};

class Reader {
 public:
  explicit Reader(std::string_view data) : p_(reinterpret_cast<const uint8_t*>(data.data())), end_(p_ + data.size()) {}

  // Advances to the next field; false at the end or on malformed input
  // (check failed() to tell the two apart). A failure moves the reader to
  // the end, so the loop condition is the one comparison.
  //
  // Kubernetes' messages have field numbers below 16 or 2048 (tags of one or
  // two bytes) and mostly short lengths, so those take straight-line paths;
  // longer varints go through the general loop. Nothing past the end is read:
  // every byte is bounds-checked before it is loaded.
  [[gnu::always_inline]] inline bool next() {
    if (p_ >= end_) return false;
    uint32_t tag = p_[0];
    if (tag < 0x80) [[likely]] {
      ++p_;
    } else if (end_ - p_ >= 2 && p_[1] < 0x80) {
      tag = (tag & 0x7f) | (uint32_t{p_[1]} << 7);
      p_ += 2;
    } else {
      uint64_t wide = 0;
      if (!varintSlow(wide) || wide > 0xffffffffu) return fail();
      tag = static_cast<uint32_t>(wide);
    }
    field_ = tag >> 3;
    type_ = static_cast<uint8_t>(tag & 7);
    if (field_ == 0) return fail();
    if (type_ == kBytes) [[likely]] {
      uint64_t len;
      if (p_ < end_ && p_[0] < 0x80) [[likely]] {
        len = *p_++;
      } else if (!varintSlow(len)) {
        return fail();
      }
      if (len > static_cast<uint64_t>(end_ - p_)) return fail();
      bytes_ = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(len));
      p_ += len;
      return true;
    }
    switch (type_) {
      case kVarint:
        if (p_ < end_ && p_[0] < 0x80) {
          value_ = *p_++;
        } else if (!varintSlow(value_)) {
          return fail();
        }
        return true;
      case kFixed64:
        if (end_ - p_ < 8) return fail();
        value_ = load(8);
        return true;
      case kFixed32:
        if (end_ - p_ < 4) return fail();
        value_ = load(4);
        return true;
      default:  // groups are not used by Kubernetes
        return fail();
    }
  }

  uint32_t field() const { return field_; }
  uint8_t type() const { return type_; }
  bool failed() const { return failed_; }
  bool isBytes() const { return type_ == kBytes; }
  bool isVarint() const { return type_ == kVarint; }
  // Valid for length-delimited fields.
  std::string_view bytes() const { return bytes_; }
  uint64_t varintValue() const { return value_; }
  int64_t int64Value() const { return static_cast<int64_t>(value_); }

 private:
  bool fail() {
    failed_ = true;
    p_ = end_;
    return false;
  }
  // At most ten bytes; the tenth may carry only the top bit of 64.
  bool varintSlow(uint64_t& out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t b = *p_++;
      if (shift == 63 && b > 1) return false;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        out = v;
        return true;
      }
    }
    return false;
  }
  uint64_t load(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p_[i]) << (8 * i);
    p_ += n;
    return v;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  std::string_view bytes_;
  uint64_t value_ = 0;
  uint32_t field_ = 0;
  uint8_t type_ = 0;
  bool failed_ = false;
};

// The "k8s\0" prefix in front of runtime.Unknown in protobuf bodies.
inline constexpr std::string_view kMagic{"k8s\0", 4};

struct Unknown {
  std::string_view apiVersion;
  std::string_view kind;
  std::string_view raw;  // the object message, e.g. a Pod
  std::string_view contentType;
};

static_assert(WireReader<Reader>);

// Parses magic + runtime.Unknown. False when the bytes are not such an envelope.
template <WireReader R = Reader>
bool parseEnvelope(std::string_view data, Unknown& out) {
  if (data.substr(0, kMagic.size()) != kMagic) return false;
  R r(data.substr(kMagic.size()));
  while (r.next()) {
    if (!r.isBytes()) continue;
    switch (r.field()) {
      case 1: {
        R tm(r.bytes());
        while (tm.next()) {
          if (tm.field() == 1 && tm.isBytes()) out.apiVersion = tm.bytes();
          if (tm.field() == 2 && tm.isBytes()) out.kind = tm.bytes();
        }
        if (tm.failed()) return false;
        break;
      }
      case 2: out.raw = r.bytes(); break;
      case 4: out.contentType = r.bytes(); break;
      default: break;
    }
  }
  return !r.failed();
}

}  // namespace tally::proto
