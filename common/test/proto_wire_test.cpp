// The wire reader's fast paths (one- and two-byte tags, one-byte lengths and
// varints) and its general path must read the same fields, and every kind of
// broken input must end the walk as a failure without reading past the end.
// Each test runs on the product's reader and on CodedReader (libprotobuf's
// CodedInputStream behind the same interface); the last one holds the two to
// the same reading of random bytes.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tally/common/proto_coded_reader.hpp"
#include "tally/common/proto_wire.hpp"

using namespace tally;

namespace {

// Encoders for the test's inputs, written out byte by byte.
std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string tag(uint32_t field, uint8_t type) { return varint((uint64_t{field} << 3) | type); }
std::string bytesField(uint32_t field, std::string_view value) {
  return tag(field, proto::kBytes) + varint(value.size()) + std::string(value);
}
std::string varintField(uint32_t field, uint64_t value) { return tag(field, proto::kVarint) + varint(value); }

struct Seen {
  uint32_t field;
  uint8_t type;
  uint64_t value;
  std::string bytes;
  bool operator==(const Seen&) const = default;
};

// All fields, and whether the walk failed.
template <class Reader>
std::pair<std::vector<Seen>, bool> readAll(std::string_view data) {
  Reader r(data);
  std::vector<Seen> seen;
  while (r.next()) {
    seen.push_back({r.field(), r.type(), r.isBytes() ? 0 : r.varintValue(), std::string(r.isBytes() ? r.bytes() : "")});
  }
  return {seen, r.failed()};
}

template <class Reader>
class ProtoWire : public ::testing::Test {};
using Readers = ::testing::Types<proto::Reader, proto::CodedReader>;
TYPED_TEST_SUITE(ProtoWire, Readers);

TYPED_TEST(ProtoWire, ReadsTagsAndLengthsOfEveryWidth) {
  const std::string longText(300, 'x');  // a two-byte length
  std::string data = bytesField(1, "ab") + varintField(15, 1) + bytesField(16, "two-byte tag") +
                     varintField(2047, 300) + bytesField(2048, longText) + varintField(1u << 28, ~uint64_t{0}) +
                     tag(3, proto::kFixed64) + std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8) +
                     tag(4, proto::kFixed32) + std::string("\x01\x00\x00\x80", 4);
  auto [seen, failed] = readAll<TypeParam>(data);
  EXPECT_FALSE(failed);
  std::vector<Seen> want{{1, proto::kBytes, 0, "ab"},
                         {15, proto::kVarint, 1, ""},
                         {16, proto::kBytes, 0, "two-byte tag"},
                         {2047, proto::kVarint, 300, ""},
                         {2048, proto::kBytes, 0, longText},
                         {1u << 28, proto::kVarint, ~uint64_t{0}, ""},
                         {3, proto::kFixed64, 0x0807060504030201, ""},
                         {4, proto::kFixed32, 0x80000001, ""}};
  EXPECT_EQ(seen, want);
}

TYPED_TEST(ProtoWire, EmptyInputIsTheEndNotAFailure) {
  auto [seen, failed] = readAll<TypeParam>("");
  EXPECT_TRUE(seen.empty());
  EXPECT_FALSE(failed);
}

TYPED_TEST(ProtoWire, RefusesTruncatedTagsLengthsAndValues) {
  const std::string good = bytesField(1, "ok");
  for (std::string broken : {
           std::string("\x80"),                             // tag cut after a continuation byte
           std::string("\xa0\x80"),                         // a two-byte tag cut short
           tag(2, proto::kBytes),                           // no length
           tag(2, proto::kBytes) + "\x85",                  // length cut short
           tag(2, proto::kBytes) + varint(3) + "ab",        // length beyond the end
           tag(2, proto::kBytes) + varint(300) + "ab",      // a two-byte length beyond the end
           tag(2, proto::kVarint),                          // no value
           tag(2, proto::kVarint) + "\xff\xff",             // value cut short
           tag(2, proto::kFixed64) + std::string(7, '\0'),  // seven of eight bytes
           tag(2, proto::kFixed32) + std::string(3, '\0'),  // three of four bytes
       }) {
    auto [seen, failed] = readAll<TypeParam>(good + broken);
    EXPECT_TRUE(failed) << "input bytes " << broken.size();
    ASSERT_EQ(seen.size(), 1u) << "the good field before the break is read";
    EXPECT_EQ(seen[0].bytes, "ok");
  }
}

TYPED_TEST(ProtoWire, RefusesOverlongVarintsFieldZeroAndGroups) {
  // Ten bytes whose last carries more than the 64th bit, and eleven bytes.
  const std::string overflow = std::string(9, '\xff') + "\x02";
  const std::string eleven = std::string(10, '\x80') + "\x01";
  for (const std::string& broken :
       {tag(1, proto::kVarint) + overflow, tag(1, proto::kVarint) + eleven, tag(1, proto::kBytes) + overflow + "x",
        overflow, varintField(0, 1), tag(1, 3) /* start group */, tag(1, 4) /* end group */,
        varint(uint64_t{1} << 35) + "\x00" /* field number beyond 32 bits */}) {
    auto [seen, failed] = readAll<TypeParam>(broken);
    EXPECT_TRUE(failed);
    EXPECT_TRUE(seen.empty());
  }
  // The largest ten-byte varint is fine.
  auto [seen, failed] = readAll<TypeParam>(tag(1, proto::kVarint) + std::string(9, '\xff') + "\x01");
  EXPECT_FALSE(failed);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].value, ~uint64_t{0});
}

TYPED_TEST(ProtoWire, NonMinimalEncodingsReadTheSameAsMinimalOnes) {
  // A one-byte tag, length and value spelled with padding continuation bytes
  // take the general path and mean the same.
  std::string padded = std::string("\x8a\x80\x00", 3) + std::string("\x82\x00", 2) + "ok" + std::string("\x90\x00", 2) +
                       std::string("\x87\x80\x80\x00", 4);
  auto [seen, failed] = readAll<TypeParam>(padded);
  EXPECT_FALSE(failed);
  std::vector<Seen> want{{1, proto::kBytes, 0, "ok"}, {2, proto::kVarint, 7, ""}};
  EXPECT_EQ(seen, want);
}

TYPED_TEST(ProtoWire, UnknownAndPackedFieldsAreSkippedWhole) {
  // A packed repeated varint (one bytes field) and an unknown nested message
  // are one field each: the reader does not enter them.
  std::string packed = varint(1) + varint(300) + varint(5);
  std::string data = bytesField(7, packed) + bytesField(99, bytesField(1, "nested") + varintField(2, 3)) +
                     varintField(7, 1) + varintField(7, 300) + bytesField(1, "after");
  auto [seen, failed] = readAll<TypeParam>(data);
  EXPECT_FALSE(failed);
  std::vector<Seen> want{{7, proto::kBytes, 0, packed},
                         {99, proto::kBytes, 0, bytesField(1, "nested") + varintField(2, 3)},
                         {7, proto::kVarint, 1, ""},
                         {7, proto::kVarint, 300, ""},
                         {1, proto::kBytes, 0, "after"}};
  EXPECT_EQ(seen, want);
}

TYPED_TEST(ProtoWire, AfterAFailureNextStaysFalse) {
  const std::string truncated = tag(1, proto::kBytes) + varint(50) + "short";  // the reader views it: keep it alive
  TypeParam r(truncated);
  EXPECT_FALSE(r.next());
  EXPECT_TRUE(r.failed());
  EXPECT_FALSE(r.next());
  EXPECT_TRUE(r.failed());
}

TYPED_TEST(ProtoWire, RandomBytesNeverReadPastTheEnd) {
  // Each input lives in its own exact-size heap block, so a read past the end
  // is visible to the sanitizer builds; here every byte must be accounted for.
  std::mt19937 rng(14);
  for (int i = 0; i < 20000; ++i) {
    std::vector<char> buf(rng() % 24);
    for (char& c : buf) c = static_cast<char>(rng() & (i % 2 ? 0xff : 0x8f));
    TypeParam r(std::string_view(buf.data(), buf.size()));
    size_t consumed = 0;
    while (r.next()) {
      if (r.isBytes()) {
        ASSERT_GE(r.bytes().data(), buf.data());
        ASSERT_LE(r.bytes().data() + r.bytes().size(), buf.data() + buf.size());
      }
      ++consumed;
    }
    ASSERT_LE(consumed, buf.size());
  }
}

TEST(ProtoWireReaders, BothReadersReadRandomBytesAlike) {
  // The same fields up to the same point, and the same verdict: biased
  // towards continuation bytes, small field numbers and short lengths so the
  // inputs reach past their first tag.
  std::mt19937 rng(28);
  for (int i = 0; i < 50000; ++i) {
    std::string buf(rng() % 32, '\0');
    for (char& c : buf) c = static_cast<char>(rng() & (i % 3 == 0 ? 0xff : i % 3 == 1 ? 0x8f : 0x1f));
    ASSERT_EQ(readAll<proto::Reader>(buf), readAll<proto::CodedReader>(buf)) << "input " << i;
  }
}

}  // namespace
