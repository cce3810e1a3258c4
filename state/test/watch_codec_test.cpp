// The adapter the informers decode with (state/watch_codec.hpp): the
// runtime's codec concept, the identity it keys and resumes by, and decode
// errors as the runtime's, naming the object and the field.

#include "tally/state/watch_codec.hpp"

#include <gtest/gtest.h>

#include "tally/runtime/json_watch.hpp"

namespace tally::state {
namespace {

static_assert(runtime::JsonCodec<WatchCodec<codec::NodeCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::PodCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::NamespaceCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::HierarchicalResourceQuotaCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::ResourceQuotaCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::DeviceClassCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::GpuDeviceCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::VirtualMachineInstanceCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::OrganizationCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::KubeVirtCodec>>);
static_assert(runtime::JsonCodec<WatchCodec<codec::BillingPlansCodec>>);

template <class Codec>
runtime::Result<typename WatchCodec<Codec>::Object> decode(std::string_view text) {
  return runtime::decodeJsonObject<WatchCodec<Codec>>(text);
}

TEST(WatchCodec, KeysAndResumesByMetadata) {
  auto pod = decode<codec::PodCodec>(R"({"metadata": {"name": "p", "namespace": "acme", "uid": "u",
    "resourceVersion": "4711"}, "spec": {"nodeName": "gpu-1"}})");
  ASSERT_TRUE(pod) << pod.error().describe();
  EXPECT_EQ(WatchCodec<codec::PodCodec>::key(*pod), "acme/p");
  EXPECT_EQ(WatchCodec<codec::PodCodec>::resourceVersion(*pod), "4711");
  EXPECT_EQ(pod->value.nodeName, "gpu-1");
}

TEST(WatchCodec, ClusterScopedKeyIsTheName) {
  auto node = decode<codec::NodeCodec>(R"({"metadata": {"name": "gpu-1", "resourceVersion": "9"}})");
  ASSERT_TRUE(node) << node.error().describe();
  EXPECT_EQ(WatchCodec<codec::NodeCodec>::key(*node), "gpu-1");
}

TEST(WatchCodec, DecodeErrorsBecomeRuntimeDecodeErrorsNamingTheField) {
  auto device = decode<codec::GpuDeviceCodec>(R"({"metadata": {"name": "d", "namespace": "n"},
    "spec": {"class": "c"}, "status": {"phase": "Gone"}})");
  ASSERT_FALSE(device);
  EXPECT_TRUE(device.error().is(runtime::ErrorCode::kDecode));
  EXPECT_EQ(device.error().message, "GPUDevice n/d: status.phase: unknown phase \"Gone\"");
}

}  // namespace
}  // namespace tally::state
