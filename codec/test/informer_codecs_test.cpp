// The adapters satisfy the runtime informer's codec concept and carry the
// object's identity next to its model value.

#include "tally/codec/informer_codecs.hpp"

#include <gtest/gtest.h>

#include "tally/codec/json_text.hpp"

namespace tally::codec {
namespace {

static_assert(runtime::JsonCodec<NodeInformerCodec>);
static_assert(runtime::JsonCodec<PodInformerCodec>);
static_assert(runtime::JsonCodec<NamespaceInformerCodec>);
static_assert(runtime::JsonCodec<HierarchicalResourceQuotaInformerCodec>);
static_assert(runtime::JsonCodec<ResourceQuotaInformerCodec>);
static_assert(runtime::JsonCodec<DeviceClassInformerCodec>);
static_assert(runtime::JsonCodec<GpuDeviceInformerCodec>);
static_assert(runtime::JsonCodec<VirtualMachineInstanceInformerCodec>);
static_assert(runtime::JsonCodec<OrganizationInformerCodec>);
static_assert(runtime::JsonCodec<KubeVirtInformerCodec>);
static_assert(runtime::JsonCodec<BillingPlansInformerCodec>);

TEST(InformerCodec, KeysAndResumesByMetadata) {
  std::optional<PodInformerCodec::Object> pod;
  Status status = withJsonValue(R"({"metadata": {"name": "p", "namespace": "acme", "uid": "u",
    "resourceVersion": "4711"}, "spec": {"nodeName": "gpu-1"}})",
                                "", [&](simdjson::ondemand::value v) -> Status {
                                  auto decoded = PodInformerCodec::fromJson(v);
                                  EXPECT_TRUE(decoded.ok());
                                  if (decoded.ok()) pod = std::move(decoded).value();
                                  return {};
                                });
  ASSERT_TRUE(status);
  ASSERT_TRUE(pod.has_value());
  EXPECT_EQ(PodInformerCodec::key(*pod), "acme/p");
  EXPECT_EQ(PodInformerCodec::resourceVersion(*pod), "4711");
  EXPECT_EQ(pod->object.nodeName, "gpu-1");
  EXPECT_EQ(pod->meta.uid, "u");
}

TEST(InformerCodec, ClusterScopedKeyIsTheName) {
  std::string key;
  Status status = withJsonValue(R"({"metadata": {"name": "gpu-1", "resourceVersion": "9"}})", "",
                                [&](simdjson::ondemand::value v) -> Status {
                                  auto decoded = NodeInformerCodec::fromJson(v);
                                  if (decoded.ok()) key = NodeInformerCodec::key(*decoded);
                                  return {};
                                });
  ASSERT_TRUE(status);
  EXPECT_EQ(key, "gpu-1");
}

TEST(InformerCodec, DecodeErrorsBecomeRuntimeDecodeErrorsNamingTheField) {
  Status status =
      withJsonValue(R"({"metadata": {"name": "d", "namespace": "n"}, "spec": {"class": "c"},
    "status": {"phase": "Gone"}})",
                    "", [&](simdjson::ondemand::value v) -> Status {
                      auto decoded = GpuDeviceInformerCodec::fromJson(v);
                      EXPECT_FALSE(decoded.ok());
                      if (!decoded.ok()) {
                        EXPECT_TRUE(decoded.error().is(runtime::ErrorCode::kDecode));
                        EXPECT_EQ(decoded.error().message, "GPUDevice n/d: status.phase: unknown phase \"Gone\"");
                      }
                      return {};
                    });
  ASSERT_TRUE(status);
}

}  // namespace
}  // namespace tally::codec
