#include "tally/runtime/json_watch.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tally/runtime/testing/slim_pod.hpp"
#include "testdata_path.h"

namespace tally::runtime {
namespace {

using codecs::SlimPod;
using codecs::SlimPodCodec;

std::string readTestdata(const std::string& name) {
  std::ifstream in(std::string(kTestdataDir) + "/" + name, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<WatchEvent<SlimPod>> decodeInPieces(const std::string& stream, size_t piece) {
  JsonWatchDecoder<SlimPodCodec> decoder;
  std::vector<WatchEvent<SlimPod>> events;
  auto sink = [&](WatchEvent<SlimPod>&& ev) { events.push_back(std::move(ev)); };
  for (size_t off = 0; off < stream.size(); off += piece) {
    auto st = decoder.feed(std::string_view(stream).substr(off, piece), sink);
    EXPECT_TRUE(st) << st.error().describe();
  }
  EXPECT_TRUE(decoder.finish(sink));
  return events;
}

// x86-64-v3 without PCLMUL once compiled simdjson's fallback kernel into every
// decoder while the build meant AVX2.
TEST(JsonKernel, DecodersRunTheKernelTheBuildAskedFor) { EXPECT_EQ(kJsonKernel, TALLY_EXPECTED_JSON_KERNEL); }

TEST(JsonWatchDecoder, DecodesEveryEventTypeOfARecordedStyleStream) {
  const auto events = decodeInPieces(readTestdata("pods_watch_synthetic.jsonl"), 1 << 20);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].type, EventType::kAdded);
  const SlimPod& pod = *events[0].object;
  EXPECT_EQ(pod.metadata.key(), "team-a/trainer-0");
  EXPECT_EQ(pod.metadata.uid, "6f1c2d7e-1111-4c1e-9a55-0a0b0c0d0e0f");
  EXPECT_EQ(pod.metadata.resourceVersion, "1001");
  ASSERT_EQ(pod.metadata.ownerReferences.size(), 1u);
  EXPECT_TRUE(pod.metadata.ownerReferences[0].controller);
  EXPECT_EQ(pod.metadata.ownerReferences[0].kind, "ReplicaSet");
  EXPECT_EQ(*pod.metadata.label("app"), "trainer");
  ASSERT_EQ(pod.containers.size(), 1u);
  EXPECT_EQ(codecs::milliOf(pod.containers[0].requests, "nvidia.com/gpu"), 2000);
  EXPECT_EQ(codecs::milliOf(pod.containers[0].requests, "memory"), 16LL * 1024 * 1024 * 1024 * 1000);
  ASSERT_EQ(pod.initContainers.size(), 1u);
  EXPECT_TRUE(pod.initContainers[0].restartPolicy == "Always");
  EXPECT_EQ(codecs::milliOf(pod.overhead, "cpu"), 250);
  EXPECT_TRUE(pod.phase == "Pending");

  EXPECT_EQ(events[1].type, EventType::kModified);
  EXPECT_TRUE(events[1].object->nodeName == "gpu-node-7");
  EXPECT_EQ(events[2].type, EventType::kBookmark);
  EXPECT_EQ(events[2].resourceVersion, "1005");
  EXPECT_TRUE(events[2].initialEventsEnd);
  EXPECT_EQ(events[3].type, EventType::kDeleted);
  EXPECT_TRUE(events[3].object->metadata.deleting);
  EXPECT_EQ(events[4].type, EventType::kError);
  EXPECT_EQ(events[4].status.code, 410);
  EXPECT_EQ(events[4].status.reason, "Expired");
}

TEST(JsonWatchDecoder, EventsSplitAtEveryPieceSizeDecodeTheSame) {
  const std::string stream = readTestdata("pods_watch_synthetic.jsonl");
  const auto whole = decodeInPieces(stream, stream.size());
  for (size_t piece : {1u, 2u, 3u, 7u, 64u, 100u, 1000u}) {
    const auto split = decodeInPieces(stream, piece);
    ASSERT_EQ(split.size(), whole.size()) << "piece " << piece;
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_EQ(split[i].type, whole[i].type);
      EXPECT_EQ(split[i].object, whole[i].object) << "piece " << piece << " event " << i;
    }
  }
}

TEST(JsonWatchDecoder, LastEventWithoutNewlineIsDecodedAtEndOfStream) {
  std::string stream = readTestdata("pods_watch_synthetic.jsonl");
  while (!stream.empty() && stream.back() == '\n') stream.pop_back();
  EXPECT_EQ(decodeInPieces(stream, 13).size(), 5u);
}

TEST(JsonWatchDecoder, ObjectBeforeTypeIsStillDecoded) {
  const std::string line =
      R"({"object":{"metadata":{"name":"p","namespace":"n","resourceVersion":"7"}},"type":"ADDED"})"
      "\n";
  const auto events = decodeInPieces(line, 5);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object->metadata.key(), "n/p");
}

// A codec that reads its value as the product's codecs do, is_null() first,
// which simdjson allows on nested values only (at a document's root it
// asserts, and is undefined under NDEBUG): it refuses a root value.
struct NestedOnlyCodec {
  struct Object {
    std::string name;
  };
  static Result<Object> fromJson(simdjson::ondemand::value v) {
    if (v.current_depth() <= 1) return Error(ErrorCode::kDecode, "handed a document root");
    bool null = false;
    if (auto e = v.is_null().get(null)) return jsonError(e, "object");
    if (null) return Error(ErrorCode::kDecode, "null");
    std::string_view name;
    if (auto e = v.find_field_unordered("metadata").find_field_unordered("name").get_string().get(name)) {
      return jsonError(e, "metadata.name");
    }
    return Object{std::string(name)};
  }
  static std::string key(const Object& o) { return o.name; }
  static std::string_view resourceVersion(const Object&) { return {}; }
};

// The state's informers decode with such codecs: an event whose object came
// before its type (read again on its own) and a GET body were handed to them
// as document roots (state_json_watch_fuzzer, UBSan: unreachable code reached
// in simdjson's value_iterator::assert_at_non_root_start).
TEST(JsonWatchDecoder, ObjectBeforeTypeReachesTheCodecAsANestedValue) {
  JsonWatchDecoder<NestedOnlyCodec> decoder;
  std::vector<std::string> names;
  auto st = decoder.feed(R"({"object":{"metadata":{"name":"p"}},"type":"MODIFIED"})"
                         "\n",
                         [&](WatchEvent<NestedOnlyCodec::Object>&& ev) { names.push_back(ev.object->name); });
  ASSERT_TRUE(st) << st.error().describe();
  EXPECT_EQ(names, std::vector<std::string>{"p"});
}

TEST(JsonObject, TheBodyReachesTheCodecAsANestedValue) {
  auto object = decodeJsonObject<NestedOnlyCodec>(R"({"metadata":{"name":"lease"}})");
  ASSERT_TRUE(object) << object.error().describe();
  EXPECT_EQ(object->name, "lease");
  EXPECT_FALSE(decodeJsonObject<NestedOnlyCodec>("null"));
  EXPECT_FALSE(decodeJsonObject<NestedOnlyCodec>(""));
  EXPECT_FALSE(decodeJsonObject<NestedOnlyCodec>("{\"metadata\":"));
}

TEST(JsonWatchDecoder, GarbageIsAnErrorNotACrash) {
  for (const char* bad :
       {"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":5}}}\n", "not json at all\n",
        "{\"type\":\"WHATEVER\",\"object\":{}}\n", "{\"type\":\"ADDED\"}\n",
        "{\"type\":\"ADDED\",\"object\":{}} trailing\n", "[1,2,3]\n",
        "{\"type\":\"ADDED\",\"object\":{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":1}}}]}}}\n",
        "{\"type\":\"ADDED\",\"object\":{\"spec\":{\"overhead\":{\"cpu\":\"12parsecs\"}}}}\n"}) {
    JsonWatchDecoder<SlimPodCodec> decoder;
    int n = 0;
    auto st = decoder.feed(bad, [&](auto&&) { ++n; });
    EXPECT_FALSE(st) << bad;
    EXPECT_EQ(n, 0) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kDecode);
  }
}

TEST(JsonWatchDecoder, OversizedEventIsRejected) {
  JsonFramer framer(1024);
  framer.append(std::string(2048, ' '));
  auto r = framer.next();
  EXPECT_FALSE(r);
}

TEST(AtomTest, EqualStringsShareOneCopy) {
  Atom a("nvidia.com/gpu");
  Atom b(std::string("nvidia.com/") + "gpu");
  EXPECT_TRUE(a == b);
  EXPECT_EQ(&a.str(), &b.str());
  EXPECT_TRUE(Atom().empty());
  EXPECT_FALSE(a == Atom("cpu"));
}

TEST(JsonList, DecodesItemsResourceVersionAndContinue) {
  const std::string body =
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"555","continue":"abc"},"items":[)"
      R"({"metadata":{"name":"a","namespace":"x","resourceVersion":"1"},"spec":{"nodeName":"n1"}},)"
      R"({"metadata":{"name":"b","namespace":"x","resourceVersion":"2"},"status":{"phase":"Running"}}]})";
  simdjson::ondemand::parser parser;
  auto page = decodeJsonList<SlimPodCodec>(parser, body);
  ASSERT_TRUE(page) << page.error().describe();
  EXPECT_EQ(page->resourceVersion, "555");
  EXPECT_EQ(page->continueToken, "abc");
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_TRUE(page->items[0].nodeName == "n1");
  EXPECT_TRUE(page->items[1].phase == "Running");
}

TEST(JsonList, NullItemsIsAnEmptyPage) {
  simdjson::ondemand::parser parser;
  auto page = decodeJsonList<MetaCodec>(parser, R"({"metadata":{"resourceVersion":"9"},"items":null})");
  ASSERT_TRUE(page);
  EXPECT_TRUE(page->items.empty());
}

}  // namespace
}  // namespace tally::runtime
