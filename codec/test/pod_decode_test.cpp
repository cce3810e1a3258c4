#include <gtest/gtest.h>

#include "decode_test_support.hpp"

namespace tally::codec {
namespace {

using testing::decodeError;
using testing::decodeOk;

TEST(PodDecode, ReadsIdentityPlacementPhaseAndOwners) {
  auto pod = decodeOk<PodCodec>(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "virt-launcher-vm-1", "namespace": "acme", "uid": "u-1",
      "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm",
                           "uid": "vmi-u", "controller": true}]},
    "spec": {"nodeName": "gpu-1", "schedulerName": "tally", "containers": []},
    "status": {"phase": "Running", "podIP": "10.0.0.1"}})");
  EXPECT_EQ(pod.ns, "acme");
  EXPECT_EQ(pod.name, "virt-launcher-vm-1");
  EXPECT_EQ(pod.uid, "u-1");
  EXPECT_EQ(pod.nodeName, "gpu-1");
  EXPECT_EQ(pod.schedulerName, "tally");
  EXPECT_EQ(pod.phase, model::PodPhase::Running);
  ASSERT_EQ(pod.owners.size(), 1u);
  EXPECT_EQ(pod.owners[0], (model::OwnerReference{"VirtualMachineInstance", "vm", "vmi-u", true, "kubevirt.io/v1"}));
}

TEST(PodDecode, KeepsOnlyGpuRequestsPerContainer) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1.5Gi", "nvidia.com/gpu": "1",
                                             "nvidia.com/gpumem": "8Gi"}}},
    {"name": "b"}]}})");
  ASSERT_EQ(pod.containers.size(), 2u);
  EXPECT_EQ(pod.containers[0].get("nvidia.com/gpu"), 1);
  EXPECT_EQ(pod.containers[0].get("nvidia.com/gpumem"), 8589934592);
  EXPECT_FALSE(pod.containers[0].contains("cpu"));
  EXPECT_TRUE(pod.containers[1].empty());
}

TEST(PodDecode, KeepsExtendedResourcesOfAnyVendorForTheModelToJudge) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"name": "a", "resources": {"requests": {"cpu": "1", "habana.ai/gaudi2": "2", "example.com/rdma": "1"}}}]}})");
  EXPECT_EQ(pod.containers[0].get("habana.ai/gaudi2"), 2);
  EXPECT_EQ(pod.containers[0].get("example.com/rdma"), 1);
  EXPECT_FALSE(pod.containers[0].contains("cpu"));
}

TEST(PodDecode, LimitsStandInForAbsentRequestsAsKubernetesDefaultsThem) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"limits": {"nvidia.com/gpu": "2", "amd.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}}]}})");
  EXPECT_EQ(pod.containers[0].get("nvidia.com/gpu"), 1);
  EXPECT_EQ(pod.containers[0].get("amd.com/gpu"), 1);
}

TEST(PodDecode, InitContainersWithRestartPolicyAlwaysAreRestartable) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {
    "initContainers": [
      {"name": "setup", "resources": {"requests": {"nvidia.com/gpu": "2"}}},
      {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}})");
  ASSERT_EQ(pod.initContainers.size(), 2u);
  EXPECT_FALSE(pod.initContainers[0].restartable);
  EXPECT_EQ(pod.initContainers[0].requests.get("nvidia.com/gpu"), 2);
  EXPECT_TRUE(pod.initContainers[1].restartable);
  EXPECT_EQ(pod.initContainers[1].requests.get("nvidia.com/gpu"), 1);
}

TEST(PodDecode, OverheadAndResourceClaims) {
  auto pod =
      decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"overhead": {"cpu": "100m", "nvidia.com/gpu": "1"},
    "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}})");
  EXPECT_EQ(pod.overhead.get("nvidia.com/gpu"), 1);
  EXPECT_FALSE(pod.overhead.contains("cpu"));
  EXPECT_TRUE(pod.hasResourceClaims);
}

TEST(PodDecode, ClaimsFromTemplatesTakeTheNamesTheStatusGivesThem) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"resourceClaims": [
      {"name": "gpu", "resourceClaimTemplateName": "two-h200"}, {"name": "shared", "resourceClaimName": "pool-a"},
      {"name": "later", "resourceClaimTemplateName": "one-h200"}]},
    "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2p"}, {"name": "other"}]}})");
  ASSERT_EQ(pod.claims.size(), 3u);
  EXPECT_EQ(pod.claims[0], (model::PodClaim{"gpu", "p-gpu-x7k2p", "two-h200"}));
  EXPECT_EQ(pod.claims[1], (model::PodClaim{"shared", "pool-a", ""}));
  EXPECT_EQ(pod.claims[2], (model::PodClaim{"later", "", "one-h200"})) << "not made yet";
  // The status may come first in the object: the names are joined after.
  auto reordered = decodeOk<PodCodec>(R"({"status": {"resourceClaimStatuses": [{"name": "gpu",
    "resourceClaimName": "made"}]}, "metadata": {"name": "p"},
    "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}})");
  ASSERT_EQ(reordered.claims.size(), 1u);
  EXPECT_EQ(reordered.claims[0].claimName, "made");
}

TEST(PodDecode, AClaimEntryThatIsNoObjectIsAnError) {
  EXPECT_EQ(decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"resourceClaims": [{"name": 7}]}})").field,
            "spec.resourceClaims[0].name");
  EXPECT_EQ(decodeError<PodCodec>(
                R"({"metadata": {"name": "p"}, "status": {"resourceClaimStatuses": [{"resourceClaimName": []}]}})")
                .field,
            "status.resourceClaimStatuses[0].resourceClaimName");
}

TEST(PodDecode, EmptyResourceClaimsAreNone) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"resourceClaims": []}})");
  EXPECT_FALSE(pod.hasResourceClaims);
}

TEST(PodDecode, UnknownPhaseIsKeptAsUnknown) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "status": {"phase": "Exploded"}})");
  EXPECT_EQ(pod.phase, model::PodPhase::Unknown);
}

TEST(PodDecode, NumericRequestsAreAccepted) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"requests": {"nvidia.com/gpu": 3}}}]}})");
  EXPECT_EQ(pod.containers[0].get("nvidia.com/gpu"), 3);
}

TEST(PodDecode, FractionalGpuRequestNamesPodContainerAndResource) {
  auto error = decodeError<PodCodec>(R"({"metadata": {"name": "p", "namespace": "acme"}, "spec": {"containers": [
    {"resources": {}}, {"resources": {"requests": {"nvidia.com/gpu": "0.5"}}}]}})");
  EXPECT_EQ(error.item, "Pod acme/p");
  EXPECT_EQ(error.field, "spec.containers[1].resources.requests[nvidia.com/gpu]");
  EXPECT_NE(error.describe().find("quantity \"0.5\" is not a whole number"), std::string::npos) << error.describe();
}

TEST(PodDecode, FloatingPointGpuRequestIsRefused) {
  auto error = decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"requests": {"nvidia.com/gpu": 1.5}}}]}})");
  EXPECT_EQ(error.field, "spec.containers[0].resources.requests[nvidia.com/gpu]");
}

TEST(PodDecode, NegativeGpuRequestIsRefused) {
  auto error = decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"requests": {"nvidia.com/gpu": "-1"}}}]}})");
  EXPECT_NE(error.message.find("negative"), std::string::npos);
}

TEST(PodDecode, FractionalCpuIsNoGpusBusiness) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": [
    {"resources": {"requests": {"cpu": "0.5", "memory": {"not": "even a string"}}}}]}})");
  EXPECT_TRUE(pod.containers[0].empty());
}

TEST(PodDecode, WrongShapesNameTheField) {
  EXPECT_EQ(decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"containers": {}}})").field,
            "spec.containers");
  EXPECT_EQ(decodeError<PodCodec>(R"({"metadata": {"name": "p", "ownerReferences": [{"controller": "yes"}]}})").field,
            "metadata.ownerReferences[0].controller");
  EXPECT_EQ(decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "status": {"phase": 3}})").field, "status.phase");
  EXPECT_EQ(
      decodeError<PodCodec>(R"({"metadata": {"name": "p"}, "spec": {"initContainers": [{"restartPolicy": 1}]}})").field,
      "spec.initContainers[0].restartPolicy");
}

TEST(PodDecode, EscapedKeysAndValuesAreUnescaped) {
  auto pod = decodeOk<PodCodec>(R"({"metadata": {"name": "p\u0031", "namespace": "a\/b"},
    "spec": {"containers": [{"resources": {"requests": {"nvidia.com\/gpu": "1"}}}]}})");
  EXPECT_EQ(pod.name, "p1");
  EXPECT_EQ(pod.ns, "a/b");
  EXPECT_EQ(pod.containers[0].get("nvidia.com/gpu"), 1);
}

}  // namespace
}  // namespace tally::codec
