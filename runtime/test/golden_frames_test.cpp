// Decodes watch streams and LIST bodies recorded from a real kube-apiserver
// (testdata/record-golden.sh) in both wire formats.

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/lease.hpp"
#include "tally/runtime/protobuf_watch.hpp"
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

template <class Decoder, class Obj>
std::vector<WatchEvent<Obj>> decodeAll(const std::string& stream, size_t piece) {
  Decoder decoder;
  std::vector<WatchEvent<Obj>> events;
  auto sink = [&](WatchEvent<Obj>&& ev) { events.push_back(std::move(ev)); };
  for (size_t off = 0; off < stream.size(); off += piece) {
    auto st = decoder.feed(std::string_view(stream).substr(off, piece), sink);
    EXPECT_TRUE(st) << st.error().describe();
  }
  EXPECT_TRUE(decoder.finish(sink));
  return events;
}

std::vector<std::string> types(const auto& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.emplace_back(eventTypeName(e.type));
  return out;
}

TEST(GoldenFrames, RecordedPodWatchDecodesIdenticallyFromJsonAndProtobuf) {
  const std::string json = readTestdata("pods_watch.json");
  const std::string pb = readTestdata("pods_watch.pb");
  ASSERT_FALSE(json.empty());
  ASSERT_FALSE(pb.empty());
  for (size_t piece : {size_t{1} << 20, size_t{4096}, size_t{1000}, size_t{7}}) {
    auto fromJson = decodeAll<JsonWatchDecoder<SlimPodCodec>, SlimPod>(json, piece);
    auto fromPb = decodeAll<ProtobufWatchDecoder<SlimPodCodec>, SlimPod>(pb, piece);
    // Both recordings start with the initial state (ADDED per pod, then the
    // initial-events-end bookmark) followed by live changes.
    const std::vector<std::string> initial{"ADDED", "ADDED", "ADDED", "ADDED", "ADDED", "ADDED", "BOOKMARK"};
    for (const auto* events : {&fromJson, &fromPb}) {
      auto t = types(*events);
      ASSERT_GE(t.size(), initial.size() + 2);
      EXPECT_EQ(std::vector<std::string>(t.begin(), t.begin() + 7), initial);
      EXPECT_NE(std::find(t.begin() + 7, t.end(), "MODIFIED"), t.end());
      EXPECT_NE(std::find(t.begin() + 7, t.end(), "DELETED"), t.end());
    }
    EXPECT_TRUE(fromJson[6].initialEventsEnd);
    EXPECT_TRUE(fromPb[6].initialEventsEnd);
    for (size_t i = 0; i < 6; ++i) {
      // The two recordings were taken apart; everything but identity stamps matches.
      SlimPod a = *fromJson[i].object;
      SlimPod b = *fromPb[i].object;
      EXPECT_FALSE(a.metadata.resourceVersion.empty());
      EXPECT_FALSE(a.metadata.uid.empty());
      for (SlimPod* p : {&a, &b}) {
        p->metadata.resourceVersion.clear();
        p->metadata.uid.clear();
        p->metadata.labels.clear();
        p->nodeName = Atom();
      }
      EXPECT_EQ(a, b) << "pod " << i;
    }
  }
}

TEST(GoldenFrames, RecordedPodCarriesEveryFieldTheSlimPodKeeps) {
  auto events = decodeAll<ProtobufWatchDecoder<SlimPodCodec>, SlimPod>(readTestdata("pods_watch.pb"), 1 << 20);
  ASSERT_FALSE(events.empty());
  const SlimPod& pod = *events[0].object;
  EXPECT_TRUE(pod.metadata.ns == "recorded");
  EXPECT_TRUE(pod.phase == "Running");
  EXPECT_FALSE(pod.nodeName.empty());
  ASSERT_EQ(pod.containers.size(), 2u);
  EXPECT_EQ(codecs::milliOf(pod.containers[0].requests, "nvidia.com/gpu"), 1000);
  EXPECT_EQ(codecs::milliOf(pod.containers[0].requests, "cpu"), 8000);
  EXPECT_EQ(codecs::milliOf(pod.containers[0].limits, "memory"), 64LL * (1LL << 30) * 1000);
  ASSERT_EQ(pod.initContainers.size(), 2u);
  EXPECT_TRUE(pod.initContainers[1].restartPolicy == "Always");
  EXPECT_EQ(codecs::milliOf(pod.overhead, "cpu"), 250);
  ASSERT_EQ(pod.metadata.ownerReferences.size(), 1u);
  EXPECT_TRUE(pod.metadata.ownerReferences[0].kind == "Job");
}

TEST(GoldenFrames, RecordedListPagesDecodeInBothFormats) {
  simdjson::ondemand::parser parser;
  auto json = decodeJsonList<SlimPodCodec>(parser, readTestdata("pods_list.json"));
  auto pb = decodeProtobufList<SlimPodCodec>(readTestdata("pods_list.pb"));
  ASSERT_TRUE(json) << json.error().describe();
  ASSERT_TRUE(pb) << pb.error().describe();
  EXPECT_EQ(json->items.size(), 4u);
  EXPECT_EQ(pb->items.size(), 4u);
  EXPECT_FALSE(json->continueToken.empty()) << "limit=4 of 6 pods leaves a continue token";
  EXPECT_FALSE(pb->continueToken.empty());
  EXPECT_FALSE(pb->resourceVersion.empty());
}

TEST(GoldenFrames, RecordedLeaseDecodesInBothFormats) {
  auto json = decodeAll<JsonWatchDecoder<LeaseCodec>, Lease>(readTestdata("lease_watch.json"), 1 << 20);
  auto pb = decodeAll<ProtobufWatchDecoder<LeaseCodec>, Lease>(readTestdata("lease_watch.pb"), 1 << 20);
  ASSERT_GE(json.size(), 1u);
  ASSERT_GE(pb.size(), 1u);
  const Lease& a = *json[0].object;
  const Lease& b = *pb[0].object;
  EXPECT_EQ(a.holderIdentity, "controller-7f9c-abcde");
  EXPECT_EQ(a.leaseDurationSeconds, 15);
  EXPECT_EQ(a.leaseTransitions, 2);
  EXPECT_EQ(a.renewTime, "2026-11-30T01:02:03.456789Z");
  EXPECT_EQ(a.holderIdentity, b.holderIdentity);
  EXPECT_EQ(a.renewTime, b.renewTime);
  EXPECT_EQ(a.acquireTime, b.acquireTime);
  EXPECT_EQ(a.metadata.name, b.metadata.name);
}

}  // namespace
}  // namespace tally::runtime
