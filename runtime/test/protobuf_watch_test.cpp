#include "tally/runtime/protobuf_watch.hpp"

#include <gtest/gtest.h>

#include "k8s_core.pb.h"
#include "tally/runtime/lease.hpp"
#include "tally/runtime/testing/slim_pod.hpp"

namespace tally::runtime {
namespace {

using codecs::SlimPod;
using codecs::SlimPodCodec;

std::string envelope(const std::string& raw, const std::string& kind) {
  tally::k8s::Unknown u;
  u.mutable_typemeta()->set_apiversion("v1");
  u.mutable_typemeta()->set_kind(kind);
  u.set_raw(raw);
  return std::string(proto::kMagic) + u.SerializeAsString();
}

std::string frame(const std::string& type, const std::string& objectBytes, const std::string& kind) {
  tally::k8s::WatchEvent ev;
  ev.set_type(type);
  ev.mutable_object()->set_raw(envelope(objectBytes, kind));
  const std::string body = ev.SerializeAsString();
  std::string out(4, '\0');
  const auto n = static_cast<uint32_t>(body.size());
  out[0] = static_cast<char>(n >> 24);
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out + body;
}

tally::k8s::Pod samplePod(const std::string& name, const std::string& rv) {
  tally::k8s::Pod pod;
  auto* meta = pod.mutable_metadata();
  meta->set_name(name);
  meta->set_namespace_("team-a");
  meta->set_uid("uid-" + name);
  meta->set_resourceversion(rv);
  (*meta->mutable_labels())["app"] = "trainer";
  (*meta->mutable_annotations())["big"] = std::string(1000, 'x');
  auto* owner = meta->add_ownerreferences();
  owner->set_kind("Job");
  owner->set_name("train");
  owner->set_uid("job-uid");
  owner->set_apiversion("batch/v1");
  owner->set_controller(true);
  auto* spec = pod.mutable_spec();
  spec->set_nodename("gpu-7");
  auto* c = spec->add_containers();
  c->set_name("main");
  c->set_image("ignored");
  (*c->mutable_resources()->mutable_requests())["nvidia.com/gpu"].set_string("4");
  (*c->mutable_resources()->mutable_limits())["nvidia.com/gpu"].set_string("4");
  auto* init = spec->add_initcontainers();
  init->set_name("sidecar");
  init->set_restartpolicy("Always");
  (*spec->mutable_overhead())["memory"].set_string("64Mi");
  pod.mutable_status()->set_phase("Running");
  return pod;
}

TEST(ProtobufWatch, DecodesPodEventsFromFramesSplitAnywhere) {
  std::string stream = frame("ADDED", samplePod("p0", "10").SerializeAsString(), "Pod") +
                       frame("MODIFIED", samplePod("p0", "11").SerializeAsString(), "Pod");
  tally::k8s::Pod bookmark;
  bookmark.mutable_metadata()->set_resourceversion("12");
  (*bookmark.mutable_metadata()->mutable_annotations())["k8s.io/initial-events-end"] = "true";
  stream += frame("BOOKMARK", bookmark.SerializeAsString(), "Pod");
  tally::k8s::Status status;
  status.set_code(410);
  status.set_reason("Expired");
  status.set_message("too old");
  stream += frame("ERROR", status.SerializeAsString(), "Status");

  for (size_t piece : {1ul, 3ul, 17ul, stream.size()}) {
    ProtobufWatchDecoder<SlimPodCodec> decoder;
    std::vector<WatchEvent<SlimPod>> events;
    for (size_t off = 0; off < stream.size(); off += piece) {
      auto st = decoder.feed(std::string_view(stream).substr(off, piece),
                             [&](auto&& ev) { events.push_back(std::move(ev)); });
      ASSERT_TRUE(st) << st.error().describe();
    }
    ASSERT_TRUE(decoder.finish([](auto&&) {}));
    ASSERT_EQ(events.size(), 4u) << "piece " << piece;
    const SlimPod& pod = *events[0].object;
    EXPECT_EQ(pod.metadata.key(), "team-a/p0");
    EXPECT_EQ(pod.metadata.resourceVersion, "10");
    EXPECT_EQ(*pod.metadata.label("app"), "trainer");
    ASSERT_EQ(pod.metadata.ownerReferences.size(), 1u);
    EXPECT_EQ(pod.metadata.ownerReferences[0], (OwnerRef{"batch/v1", "Job", "train", "job-uid", true}));
    EXPECT_TRUE(pod.nodeName == "gpu-7");
    EXPECT_EQ(codecs::milliOf(pod.containers.at(0).requests, "nvidia.com/gpu"), 4000);
    EXPECT_EQ(codecs::milliOf(pod.containers.at(0).limits, "nvidia.com/gpu"), 4000);
    EXPECT_TRUE(pod.initContainers.at(0).restartPolicy == "Always");
    EXPECT_EQ(codecs::milliOf(pod.overhead, "memory"), 64LL * 1024 * 1024 * 1000);
    EXPECT_TRUE(pod.phase == "Running");
    EXPECT_EQ(events[1].type, EventType::kModified);
    EXPECT_EQ(events[2].type, EventType::kBookmark);
    EXPECT_EQ(events[2].resourceVersion, "12");
    EXPECT_TRUE(events[2].initialEventsEnd);
    EXPECT_EQ(events[3].type, EventType::kError);
    EXPECT_EQ(events[3].status.code, 410);
  }
}

TEST(ProtobufWatch, TruncatedStreamAndCorruptFramesAreErrors) {
  const std::string good = frame("ADDED", samplePod("p", "1").SerializeAsString(), "Pod");
  ProtobufWatchDecoder<SlimPodCodec> truncated;
  ASSERT_TRUE(truncated.feed(good.substr(0, good.size() - 3), [](auto&&) {}));
  EXPECT_FALSE(truncated.finish([](auto&&) {}));

  std::string huge = "\x7f\xff\xff\xff";
  ProtobufWatchDecoder<SlimPodCodec> d1;
  EXPECT_FALSE(d1.feed(huge, [](auto&&) {}));

  std::string noMagic = good;
  const auto pos = noMagic.find(std::string(proto::kMagic));
  ASSERT_NE(pos, std::string::npos);
  noMagic[pos] = 'X';
  ProtobufWatchDecoder<SlimPodCodec> d2;
  EXPECT_FALSE(d2.feed(noMagic, [](auto&&) {}));

  // Flip every byte of the frame body in turn: never a crash, and either an
  // error or a decoded event.
  for (size_t i = 4; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    ProtobufWatchDecoder<SlimPodCodec> d;
    (void)d.feed(bad, [](auto&&) {});
  }
}

TEST(ProtobufList, DecodesItemsAndListMeta) {
  tally::k8s::PodList list;
  list.mutable_metadata()->set_resourceversion("77");
  list.mutable_metadata()->set_continue_("next");
  *list.add_items() = samplePod("a", "1");
  *list.add_items() = samplePod("b", "2");
  auto page = decodeProtobufList<SlimPodCodec>(envelope(list.SerializeAsString(), "PodList"));
  ASSERT_TRUE(page) << page.error().describe();
  EXPECT_EQ(page->resourceVersion, "77");
  EXPECT_EQ(page->continueToken, "next");
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->items[1].metadata.name, "b");
}

TEST(ProtobufLease, DecodesSpecAndFormatsMicroTime) {
  tally::k8s::Lease lease;
  lease.mutable_metadata()->set_name("tally-leader");
  lease.mutable_metadata()->set_namespace_("tally-system");
  lease.mutable_spec()->set_holderidentity("pod-a");
  lease.mutable_spec()->set_leasedurationseconds(15);
  lease.mutable_spec()->set_leasetransitions(3);
  lease.mutable_spec()->mutable_renewtime()->set_seconds(1'800'000'000);
  lease.mutable_spec()->mutable_renewtime()->set_nanos(123'456'000);
  auto decoded = decodeProtobufObject<LeaseCodec>(envelope(lease.SerializeAsString(), "Lease"));
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(decoded->holderIdentity, "pod-a");
  EXPECT_EQ(decoded->leaseDurationSeconds, 15);
  EXPECT_EQ(decoded->leaseTransitions, 3);
  EXPECT_EQ(decoded->renewTime, "2027-01-15T08:00:00.123456Z");
}

}  // namespace
}  // namespace tally::runtime
