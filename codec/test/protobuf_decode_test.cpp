// The protobuf decoders give the same model values as the JSON decoders for
// the same objects (encoded here with protoc's classes from runtime/proto, the
// reference for the wire format), and refuse broken bytes without crashing.
// The same decoders on libprotobuf's CodedInputStream (proto::CodedReader)
// must give what they give on the product's reader, for every message, every
// truncation and every mutation of it.

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "decode_test_support.hpp"
#include "k8s_core.pb.h"
#include "tally/codec/protobuf.hpp"
#include "tally/common/proto_coded_reader.hpp"

namespace tally::codec {
namespace {

using testing::decodeOk;

constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";

void quantity(google::protobuf::Map<std::string, k8s::Quantity>& map, const std::string& name, const std::string& q) {
  map[name].set_string(q);
}

k8s::Pod launcherPod() {
  k8s::Pod pod;
  auto* meta = pod.mutable_metadata();
  meta->set_name("virt-launcher-vm-x7k2p");
  meta->set_namespace_("acme-research");
  meta->set_uid("uid-1");
  meta->set_resourceversion("42");
  (*meta->mutable_labels())["kubevirt.io"] = "virt-launcher";
  auto* owner = meta->add_ownerreferences();
  owner->set_kind("VirtualMachineInstance");
  owner->set_name("vm");
  owner->set_uid("vmi-uid");
  owner->set_controller(true);
  auto* spec = pod.mutable_spec();
  spec->set_nodename("gpu-h200-01");
  spec->set_schedulername("tally-scheduler");
  auto* app = spec->add_containers();
  app->set_name("compute");
  quantity(*app->mutable_resources()->mutable_requests(), "cpu", "250m");
  quantity(*app->mutable_resources()->mutable_limits(), std::string(kH200), "2");  // request defaults to the limit
  auto* sidecar = spec->add_initcontainers();
  sidecar->set_restartpolicy("Always");
  quantity(*sidecar->mutable_resources()->mutable_requests(), "habana.ai/gaudi2", "1");
  auto* init = spec->add_initcontainers();
  quantity(*init->mutable_resources()->mutable_requests(), std::string(kH200), "3");
  quantity(*spec->mutable_overhead(), std::string(kH200), "0");
  auto* claim = spec->add_resourceclaims();
  claim->set_name("gpu");
  claim->set_resourceclaimtemplatename("one-h200");
  auto* named = spec->add_resourceclaims();
  named->set_name("shared");
  named->set_resourceclaimname("pool-a");
  pod.mutable_status()->set_phase("Running");
  auto* made = pod.mutable_status()->add_resourceclaimstatuses();
  made->set_name("gpu");
  made->set_resourceclaimname("vm-gpu-x7k2p");
  return pod;
}

constexpr std::string_view kLauncherJson = R"({"metadata": {"name": "virt-launcher-vm-x7k2p",
  "namespace": "acme-research", "uid": "uid-1", "resourceVersion": "42", "labels": {"kubevirt.io": "virt-launcher"},
  "ownerReferences": [{"kind": "VirtualMachineInstance", "name": "vm", "uid": "vmi-uid", "controller": true}]},
  "spec": {"nodeName": "gpu-h200-01", "schedulerName": "tally-scheduler",
    "containers": [{"name": "compute", "resources": {"requests": {"cpu": "250m"},
                                                     "limits": {"nvidia.com/GH100_H200_SXM_141GB": "2"}}}],
    "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"habana.ai/gaudi2": "1"}}},
                       {"resources": {"requests": {"nvidia.com/GH100_H200_SXM_141GB": "3"}}}],
    "overhead": {"nvidia.com/GH100_H200_SXM_141GB": "0"}, "resourceClaims": [{"name": "gpu",
    "resourceClaimTemplateName": "one-h200"}, {"name": "shared", "resourceClaimName": "pool-a"}]},
  "status": {"phase": "Running", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "vm-gpu-x7k2p"}]}})";

TEST(PodProtobuf, DecodesTheSameModelValueAsJson) {
  std::string bytes = launcherPod().SerializeAsString();
  ObjectMeta meta;
  auto pod = decodePodProtobuf(bytes, &meta);
  ASSERT_TRUE(pod) << pod.error().describe();
  EXPECT_EQ(*pod, decodeOk<PodCodec>(kLauncherJson));
  EXPECT_EQ(pod->containers.at(0).get(kH200), 2) << "the limit stands in for the absent request";
  EXPECT_TRUE(pod->initContainers.at(0).restartable);
  EXPECT_TRUE(pod->hasResourceClaims);
  ASSERT_EQ(pod->claims.size(), 2u);
  EXPECT_EQ(pod->claims[0], (model::PodClaim{"gpu", "vm-gpu-x7k2p", "one-h200"}));
  EXPECT_EQ(pod->claims[1], (model::PodClaim{"shared", "pool-a", ""}));
  EXPECT_EQ(meta.resourceVersion, "42");
  EXPECT_EQ(meta.ns, "acme-research");
}

k8s::Node vgpuNode() {
  k8s::Node node;
  auto* meta = node.mutable_metadata();
  meta->set_name("gpu-a100-01");
  meta->set_resourceversion("7");
  (*meta->mutable_labels())["kube-dc.com/gpu.workload-mode"] = "vm-vgpu";
  (*meta->mutable_labels())["kube-dc.com/gpu.expected-workload-mode"] = "vm-vgpu";
  (*meta->mutable_annotations())["gpu.tally.dev/inventory"] =
      R"({"parents":[{"id":"0000:3b:00.0","healthy":true,"types":{"nvidia.com/A100-10C":{"total":4,"created":1,"available":3}}}]})";
  node.mutable_spec()->set_unschedulable(true);
  auto* status = node.mutable_status();
  quantity(*status->mutable_capacity(), "nvidia.com/A100-10C", "4");
  quantity(*status->mutable_allocatable(), "nvidia.com/A100-10C", "3");
  quantity(*status->mutable_allocatable(), "memory", "1Gi");
  auto* ready = status->add_conditions();
  ready->set_type("Ready");
  ready->set_status("True");
  return node;
}

TEST(NodeProtobuf, DecodesTheSameModelValueAsJson) {
  auto decoded = decodeNodeProtobuf(vgpuNode().SerializeAsString());
  ASSERT_TRUE(decoded) << decoded.error().describe();
  auto json = decodeOk<NodeCodec>(R"({"metadata": {"name": "gpu-a100-01", "resourceVersion": "7",
    "labels": {"kube-dc.com/gpu.workload-mode": "vm-vgpu", "kube-dc.com/gpu.expected-workload-mode": "vm-vgpu"},
    "annotations": {"gpu.tally.dev/inventory": "{\"parents\":[{\"id\":\"0000:3b:00.0\",\"healthy\":true,\"types\":{\"nvidia.com/A100-10C\":{\"total\":4,\"created\":1,\"available\":3}}}]}"}},
    "spec": {"unschedulable": true},
    "status": {"capacity": {"nvidia.com/A100-10C": "4"}, "allocatable": {"nvidia.com/A100-10C": "3", "memory": "1Gi"},
               "conditions": [{"type": "Ready", "status": "True"}]}})");
  EXPECT_EQ(*decoded, json);
  EXPECT_EQ(decoded->capacity.get("nvidia.com/A100-10C"), 4);
  ASSERT_TRUE(decoded->inventory.has_value());
  EXPECT_EQ(decoded->inventory->size(), 1u);
}

k8s::Namespace deletingNamespace() {
  k8s::Namespace ns;
  auto* meta = ns.mutable_metadata();
  meta->set_name("acme-research");
  (*meta->mutable_labels())["acme-research.tree.hnc.x-k8s.io/depth"] = "0";
  (*meta->mutable_labels())["acme.tree.hnc.x-k8s.io/depth"] = "1";
  (*meta->mutable_labels())["gpu.tally.dev/entitled-nvidia-a100-10c"] = "true";
  meta->mutable_deletiontimestamp()->set_seconds(1);
  return ns;
}

TEST(NamespaceProtobuf, DecodesTreeEntitlementAndDeletion) {
  auto decoded = decodeNamespaceProtobuf(deletingNamespace().SerializeAsString());
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(*decoded, decodeOk<NamespaceCodec>(R"({"metadata": {"name": "acme-research",
    "deletionTimestamp": "2026-01-01T00:00:00Z", "labels": {"acme-research.tree.hnc.x-k8s.io/depth": "0",
    "acme.tree.hnc.x-k8s.io/depth": "1", "gpu.tally.dev/entitled-nvidia-a100-10c": "true"}}})"));
  EXPECT_TRUE(decoded->deleting);
  EXPECT_EQ(decoded->tree.at("acme"), 1);
}

k8s::ResourceQuota gpuQuota() {
  k8s::ResourceQuota q;
  q.mutable_metadata()->set_name("project-quota");
  q.mutable_metadata()->set_namespace_("acme-research");
  quantity(*q.mutable_spec()->mutable_hard(), "requests.nvidia.com/gpu", "4");
  quantity(*q.mutable_spec()->mutable_hard(), "requests.cpu", "8");
  quantity(*q.mutable_status()->mutable_used(), "requests.nvidia.com/gpu", "1");
  return q;
}

TEST(ResourceQuotaProtobuf, DecodesGpuKeysOfHardAndUsed) {
  auto decoded = decodeResourceQuotaProtobuf(gpuQuota().SerializeAsString());
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(*decoded, decodeOk<ResourceQuotaCodec>(R"({"metadata": {"name": "project-quota",
    "namespace": "acme-research"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.cpu": "8"}},
    "status": {"used": {"requests.nvidia.com/gpu": "1"}}})"));
}

TEST(PodProtobuf, FractionalGpuNamesTheObjectAndTheField) {
  k8s::Pod pod = launcherPod();
  quantity(*pod.mutable_spec()->mutable_containers(0)->mutable_resources()->mutable_requests(), std::string(kH200),
           "500m");
  auto decoded = decodePodProtobuf(pod.SerializeAsString());
  ASSERT_FALSE(decoded);
  const std::string text = decoded.error().describe();
  EXPECT_NE(text.find("Pod acme-research/virt-launcher-vm-x7k2p"), std::string::npos) << text;
  EXPECT_NE(text.find("spec.containers[0].resources.requests[nvidia.com/GH100_H200_SXM_141GB]"), std::string::npos)
      << text;
}

TEST(PodProtobuf, EveryTruncationAndRandomByteIsRefusedOrDecodedNeverACrash) {
  const std::string bytes = launcherPod().SerializeAsString();
  int refused = 0;
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = decodePodProtobuf(std::string_view(bytes).substr(0, n));
    refused += decoded ? 0 : 1;
  }
  EXPECT_GT(refused, static_cast<int>(bytes.size() / 2));
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = bytes;
    mutated[rng() % mutated.size()] = static_cast<char>(rng());
    (void)decodePodProtobuf(mutated);
    (void)decodeNodeProtobuf(mutated);
    (void)decodeNamespaceProtobuf(mutated);
    (void)decodeResourceQuotaProtobuf(mutated);
  }
}

// Hand-made wire bytes for what protoc's classes never write.
std::string wireVarint(std::uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  return out + static_cast<char>(v);
}
std::string wireBytes(std::uint32_t field, std::string_view value) {
  return wireVarint(std::uint64_t{field} << 3 | 2) + wireVarint(value.size()) + std::string(value);
}

TEST(PodProtobuf, UnknownFieldsAndWrongWireTypesAreSkipped) {
  // Fields from a newer API (unknown numbers, two-byte tags, nested messages)
  // anywhere in the pod, and a known number with another wire type, decode as
  // if absent: the decoder enters only messages it reads.
  k8s::Pod pod = launcherPod();
  std::string unknown = wireBytes(2000, wireBytes(1, "future")) + wireVarint(std::uint64_t{77} << 3) + wireVarint(300);
  std::string container = pod.spec().containers(0).SerializeAsString() + unknown;
  k8s::PodSpec rest = pod.spec();
  rest.clear_containers();
  // containers as a varint: not a message, so not a container.
  std::string spec = wireBytes(2, container) + rest.SerializeAsString() + wireVarint(2 << 3) + wireVarint(5);
  std::string bytes = wireBytes(1, pod.metadata().SerializeAsString() + unknown) + wireBytes(2, spec) +
                      wireBytes(3, pod.status().SerializeAsString()) + unknown;
  auto decoded = decodePodProtobuf(bytes);
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_EQ(*decoded, decodeOk<PodCodec>(kLauncherJson));
}

TEST(PodProtobuf, ABrokenContainerNamesTheContainer) {
  // A container whose resources claim more bytes than it holds.
  k8s::Pod pod = launcherPod();
  std::string container = pod.spec().containers(0).SerializeAsString() + wireVarint(8 << 3 | 2) + wireVarint(9) + "ab";
  k8s::PodSpec rest = pod.spec();
  rest.clear_containers();
  std::string spec = wireBytes(2, container) + rest.SerializeAsString();
  std::string bytes = wireBytes(1, pod.metadata().SerializeAsString()) + wireBytes(2, spec);
  auto decoded = decodePodProtobuf(bytes);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().field, "spec.containers[0]");
  EXPECT_EQ(decoded.error().message, "malformed protobuf");
  EXPECT_NE(decoded.error().describe().find("Pod acme-research/virt-launcher-vm-x7k2p"), std::string::npos);
}

TEST(PodProtobuf, OverlongVarintsAreRefused) {
  // An eleven-byte varint where the pod's phase length should be.
  k8s::Pod pod = launcherPod();
  std::string status = wireVarint(1 << 3 | 2) + std::string(10, '\x80') + "\x01";
  std::string bytes = wireBytes(1, pod.metadata().SerializeAsString()) + wireBytes(3, status);
  auto decoded = decodePodProtobuf(bytes);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error().field, "status");
}

// What one decode gives: the value and the identity, or the error's text (a
// refused value is partly filled and not compared).
template <class T>
struct Outcome {
  std::optional<T> value;
  ObjectMeta meta;
  std::string error;
  bool operator==(const Outcome&) const = default;
};

template <class T>
using DecodeInto = Status (*)(std::string_view, T&, ObjectMeta*);

template <class T>
Outcome<T> outcomeOf(DecodeInto<T> decode, std::string_view bytes) {
  Outcome<T> out;
  T value;
  if (Status read = decode(bytes, value, &out.meta); !read) {
    out.error = read.error().describe();
  } else {
    out.value = std::move(value);
  }
  return out;
}

// One kind's decoder on both readers.
template <class T>
struct BothReaders {
  DecodeInto<T> shipped;
  DecodeInto<T> library;
  // The two outcomes of `bytes`, asserted equal; true when it decoded.
  bool same(std::string_view bytes) const {
    const Outcome<T> a = outcomeOf(shipped, bytes), b = outcomeOf(library, bytes);
    EXPECT_EQ(a, b) << "proto::Reader: " << (a.value ? "decoded" : a.error)
                    << "; CodedReader: " << (b.value ? "decoded" : b.error);
    return a.value.has_value();
  }
};

const BothReaders<model::Pod> kPods{decodePodProtobufOn<proto::Reader>, decodePodProtobufOn<proto::CodedReader>};
const BothReaders<model::Node> kNodes{decodeNodeProtobufOn<proto::Reader>, decodeNodeProtobufOn<proto::CodedReader>};
const BothReaders<model::Namespace> kNamespaces{decodeNamespaceProtobufOn<proto::Reader>,
                                                decodeNamespaceProtobufOn<proto::CodedReader>};
const BothReaders<model::ResourceQuota> kQuotas{decodeResourceQuotaProtobufOn<proto::Reader>,
                                                decodeResourceQuotaProtobufOn<proto::CodedReader>};

// Every kind's decoder on both readers, for the same bytes.
void sameOnBothReaders(std::string_view bytes) {
  kPods.same(bytes);
  kNodes.same(bytes);
  kNamespaces.same(bytes);
  kQuotas.same(bytes);
}

std::vector<std::string> generatedMessages() {
  return {launcherPod().SerializeAsString(), vgpuNode().SerializeAsString(), deletingNamespace().SerializeAsString(),
          gpuQuota().SerializeAsString()};
}

TEST(ProtobufReaders, GeneratedMessagesDecodeAlikeOnBothReaders) {
  EXPECT_TRUE(kPods.same(launcherPod().SerializeAsString()));
  EXPECT_TRUE(kNodes.same(vgpuNode().SerializeAsString()));
  EXPECT_TRUE(kNamespaces.same(deletingNamespace().SerializeAsString()));
  EXPECT_TRUE(kQuotas.same(gpuQuota().SerializeAsString()));
}

TEST(ProtobufReaders, EveryTruncationIsRefusedOrDecodedAlikeOnBothReaders) {
  for (const std::string& bytes : generatedMessages()) {
    int refused = 0;
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      // Each prefix in a heap block of its own size: a read past it is the
      // sanitizer builds' to see.
      const std::vector<char> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      const std::string_view cut(prefix.data(), prefix.size());
      sameOnBothReaders(cut);
      refused += kPods.same(cut) ? 0 : 1;
    }
    EXPECT_GT(refused, 0);
  }
}

TEST(ProtobufReaders, MutatedMessagesDecodeOrFailAlikeOnBothReaders) {
  std::mt19937 rng(28);
  for (const std::string& bytes : generatedMessages()) {
    for (int i = 0; i < 3000; ++i) {
      std::string mutated = bytes;
      const std::size_t at = rng() % mutated.size();
      switch (i % 3) {
        case 0: mutated[at] = static_cast<char>(rng()); break;
        case 1: mutated.insert(at, 1, static_cast<char>(rng() | 0x80)); break;  // a continuation byte
        default: mutated.erase(at, 1 + rng() % 4); break;
      }
      sameOnBothReaders(mutated);
    }
  }
}

TEST(ProtobufReaders, WhatOnlyHandMadeBytesHoldIsRefusedByBothReaders) {
  // What protoc never writes, inside the pod's status: a group, a tag beyond
  // 32 bits, field 0, a ten-byte varint carrying bit 65, a length beyond 32 bits.
  const std::string meta = wireBytes(1, launcherPod().metadata().SerializeAsString());
  for (const std::string& status : {wireVarint(1 << 3 | 3), wireVarint(std::uint64_t{1} << 35) + wireVarint(1),
                                    wireVarint(0) + wireVarint(1), wireVarint(2 << 3) + std::string(9, '\xff') + "\x02",
                                    wireVarint(1 << 3 | 2) + wireVarint((std::uint64_t{1} << 32) + 2) + "ok"}) {
    EXPECT_FALSE(kPods.same(meta + wireBytes(3, status)));
  }
}

}  // namespace
}  // namespace tally::codec
