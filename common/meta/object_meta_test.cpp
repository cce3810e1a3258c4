// The one ObjectMeta decoder pair: JSON and protobuf give the same value for
// the same metadata, keep only the parts asked for, and name the field of a
// broken input.

#include <gtest/gtest.h>

#include <string>

#include "tally/common/object_meta_decode.hpp"

using namespace tally;

namespace {

std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  return out + static_cast<char>(v);
}
std::string bytes(uint32_t field, std::string_view value) {
  return varint(uint64_t{field} << 3 | 2) + varint(value.size()) + std::string(value);
}
std::string number(uint32_t field, uint64_t value) { return varint(uint64_t{field} << 3) + varint(value); }

// The same metadata in both encodings (protobuf by field number, see the header).
const std::string kProtobuf =
    bytes(1, "p") + bytes(3, "team-a") + bytes(5, "uid-1") + bytes(6, "42") + number(7, 3) +
    bytes(8, number(1, 1700000000)) + bytes(9, number(1, 1)) + bytes(11, bytes(1, "app") + bytes(2, "web")) +
    bytes(12, bytes(1, "note") + bytes(2, "x")) +
    bytes(13, bytes(1, "ReplicaSet") + bytes(3, "rs") + bytes(4, "rs-uid") + bytes(5, "apps/v1") + number(6, 1)) +
    bytes(14, "gpu.tally.dev/release") + bytes(14, "other/f") + bytes(17, bytes(1, "managed fields are skipped")) +
    number(99, 7);
constexpr std::string_view kJson = R"({"name": "p", "namespace": "team-a", "uid": "uid-1", "resourceVersion": "42",
  "generation": 3, "creationTimestamp": "2023-11-14T22:13:20Z", "deletionTimestamp": "2023-11-15T00:00:00Z",
  "labels": {"app": "web"}, "annotations": {"note": "x"},
  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                       "controller": true}],
  "finalizers": ["gpu.tally.dev/release", "other/f"],
  "managedFields": [{"manager": "kubectl"}], "unknown": {"deep": [1, 2]}})";

ObjectMeta want() {
  ObjectMeta m;
  m.name = "p";
  m.ns = "team-a";
  m.uid = "uid-1";
  m.resourceVersion = "42";
  m.generation = 3;
  m.created = 1700000000;
  m.deleting = true;
  m.labels = {{"app", "web"}};
  m.annotations = {{"note", "x"}};
  m.ownerReferences = {{"apps/v1", "ReplicaSet", "rs", "rs-uid", true}};
  m.finalizers = {"gpu.tally.dev/release", "other/f"};
  return m;
}

MetaStatus fromJson(std::string_view text, ObjectMeta& out, unsigned parts = kMetaAll) {
  static simdjson::ondemand::parser parser;
  // Metadata is always a field of an object (never the document's root, which
  // simdjson's on-demand values treat differently): decode it as one.
  simdjson::padded_string padded("{\"metadata\": " + std::string(text) + "}");
  simdjson::ondemand::document doc;
  if (auto code = parser.iterate(padded).get(doc)) return MetaError{"", simdjson::error_message(code)};
  simdjson::ondemand::value value;
  if (auto code = doc["metadata"].get(value)) return MetaError{"", simdjson::error_message(code)};
  return decodeObjectMetaJson(value, out, parts);
}

TEST(ObjectMeta, JsonAndProtobufDecodeTheSameValue) {
  ObjectMeta json, pb;
  ASSERT_TRUE(fromJson(kJson, json));
  ASSERT_TRUE(decodeObjectMetaProtobuf(kProtobuf, pb));
  EXPECT_EQ(json, want());
  EXPECT_EQ(pb, want());
  EXPECT_EQ(pb.key(), "team-a/p");
  ASSERT_NE(pb.label("app"), nullptr);
  EXPECT_EQ(*pb.label("app"), "web");
  EXPECT_EQ(pb.annotation("missing"), nullptr);
  EXPECT_TRUE(pb.hasFinalizer("gpu.tally.dev/release"));
  EXPECT_FALSE(pb.hasFinalizer("gpu.tally.dev"));
}

TEST(ObjectMeta, FinalizersThatAreNotStringsAreRefusedByIndex) {
  ObjectMeta m;
  auto st = fromJson(R"({"finalizers": ["a", 7]})", m);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().field, "metadata.finalizers[1]");
  ObjectMeta n;
  ASSERT_TRUE(fromJson(R"({"finalizers": null})", n));
  EXPECT_TRUE(n.finalizers.empty());
}

TEST(ObjectMeta, KeepsOnlyThePartsAskedFor) {
  ObjectMeta want_core = want();
  want_core.labels.clear();
  want_core.ownerReferences.clear();
  want_core.finalizers.clear();
  want_core.created = 0;
  ObjectMeta json, pb;
  ASSERT_TRUE(fromJson(kJson, json, kMetaAnnotations));
  ASSERT_TRUE(decodeObjectMetaProtobuf(kProtobuf, pb, kMetaAnnotations));
  EXPECT_EQ(json, want_core);
  EXPECT_EQ(pb, want_core);
}

TEST(ObjectMeta, NullsReadAsAbsent) {
  ObjectMeta m;
  ASSERT_TRUE(fromJson(R"({"name": "n", "namespace": null, "deletionTimestamp": null, "labels": null,
                           "ownerReferences": null, "generation": null})",
                       m));
  EXPECT_EQ(m.key(), "n");
  EXPECT_FALSE(m.deleting);
  EXPECT_TRUE(m.labels.empty());
}

TEST(ObjectMeta, JsonErrorsNameTheField) {
  auto field = [](std::string_view text) {
    ObjectMeta m;
    auto st = fromJson(text, m);
    EXPECT_FALSE(st) << text;
    return st ? std::string() : st.error().field;
  };
  EXPECT_EQ(field(R"({"name": 7})"), "metadata.name");
  EXPECT_EQ(field(R"({"labels": {"a": 1}})"), "metadata.labels[a]");
  EXPECT_EQ(field(R"({"ownerReferences": [{"kind": "K"}, {"controller": "yes"}]})"),
            "metadata.ownerReferences[1].controller");
  EXPECT_EQ(field(R"({"generation": "3"})"), "metadata.generation");
  EXPECT_EQ(field(R"({"creationTimestamp": "yesterday"})"), "metadata.creationTimestamp");
  EXPECT_EQ(field(R"([])"), "metadata");
}

TEST(ObjectMeta, ProtobufErrorsNameTheMessage) {
  auto field = [](const std::string& message) {
    ObjectMeta m;
    auto st = decodeObjectMetaProtobuf(message, m);
    EXPECT_FALSE(st);
    return st ? std::string() : st.error().field;
  };
  EXPECT_EQ(field(bytes(1, "p") + "\x0a\x05"
                                  "ab"),
            "metadata");  // name longer than the message
  EXPECT_EQ(field(bytes(11,
                        "\x0a\x09"
                        "k")),
            "metadata.labels");
  EXPECT_EQ(field(bytes(13, "\x08")), "metadata.ownerReferences");
  EXPECT_EQ(field(bytes(8, "\x08")), "metadata.creationTimestamp");
  // Parts not asked for are skipped by length, unread, so their insides cannot fail.
  ObjectMeta m;
  EXPECT_TRUE(decodeObjectMetaProtobuf(bytes(1, "p") + bytes(11,
                                                             "\x0a\x09"
                                                             "k"),
                                       m, kMetaCore));
  EXPECT_EQ(m.name, "p");
}

TEST(ObjectMeta, HoldsNoHeapWhenOnlyTheCoreIsKept) {
  // The cache size argument: optional parts are empty vectors.
  ObjectMeta m;
  ASSERT_TRUE(decodeObjectMetaProtobuf(kProtobuf, m, kMetaCore));
  EXPECT_EQ(m.labels.capacity(), 0u);
  EXPECT_EQ(m.annotations.capacity(), 0u);
  EXPECT_EQ(m.ownerReferences.capacity(), 0u);
  EXPECT_EQ(m.finalizers.capacity(), 0u);
  EXPECT_LE(sizeof(ObjectMeta), 256u);
}

}  // namespace
