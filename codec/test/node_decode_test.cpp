#include <gtest/gtest.h>

#include "decode_test_support.hpp"

namespace tally::codec {
namespace {

using testing::decodeError;
using testing::decodeOk;

constexpr std::string_view kH200 = "nvidia.com/GH100_H200_SXM_141GB";

TEST(NodeDecode, ReadsModesReadinessCordonAndGpuAllocatable) {
  auto node = decodeOk<NodeCodec>(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-1", "labels": {
      "kube-dc.com/gpu.workload-mode": "vm-passthrough",
      "kube-dc.com/gpu.expected-workload-mode": "vm-vgpu", "other": "x"}},
    "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24"},
    "status": {
      "allocatable": {"cpu": "63500m", "memory": "1Gi", "nvidia.com/GH100_H200_SXM_141GB": "8", "amd.com/gpu": "2k"},
      "conditions": [{"type": "DiskPressure", "status": "True"}, {"type": "Ready", "status": "True"}]}})");
  EXPECT_EQ(node.name, "gpu-1");
  EXPECT_EQ(node.activeMode, model::NodeMode::VmPassthrough);
  EXPECT_EQ(node.expectedMode, model::NodeMode::VmVgpu);
  EXPECT_TRUE(node.ready);
  EXPECT_TRUE(node.unschedulable);
  EXPECT_EQ(node.allocatable.get(kH200), 8);
  EXPECT_EQ(node.allocatable.get("amd.com/gpu"), 2000);
  EXPECT_FALSE(node.allocatable.contains("cpu"));
  EXPECT_FALSE(node.allocatable.contains("memory"));
  EXPECT_FALSE(node.inventory.has_value());
}

TEST(NodeDecode, KeepsCapacityAndExtendedResourcesOfAnyVendor) {
  auto node = decodeOk<NodeCodec>(R"({"metadata": {"name": "hl-1"}, "status": {
      "capacity": {"cpu": "64", "habana.ai/gaudi2": "8", "nvidia.com/GH100_H200_SXM_141GB": "8"},
      "allocatable": {"cpu": "63", "habana.ai/gaudi2": "7", "nvidia.com/GH100_H200_SXM_141GB": "8",
                      "hugepages-1Gi": "0", "kubernetes.io/something": "1"}}})");
  EXPECT_EQ(node.capacity.get("habana.ai/gaudi2"), 8);
  EXPECT_EQ(node.allocatable.get("habana.ai/gaudi2"), 7);
  EXPECT_EQ(node.capacity.get(kH200), 8);
  EXPECT_FALSE(node.capacity.contains("cpu"));
  EXPECT_FALSE(node.allocatable.contains("hugepages-1Gi"));
  EXPECT_FALSE(node.allocatable.contains("kubernetes.io/something"));
}

TEST(NodeDecode, FieldOrderDoesNotMatter) {
  auto node = decodeOk<NodeCodec>(R"({"status": {"conditions": [{"status": "True", "type": "Ready"}]},
    "metadata": {"labels": {"kube-dc.com/gpu.workload-mode": "pod-hami"}, "name": "n"}, "kind": "Node"})");
  EXPECT_EQ(node.name, "n");
  EXPECT_TRUE(node.ready);
  EXPECT_EQ(node.activeMode, model::NodeMode::PodHami);
}

TEST(NodeDecode, ReadyUnknownIsNotReady) {
  auto node = decodeOk<NodeCodec>(R"({"metadata": {"name": "n"},
    "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})");
  EXPECT_FALSE(node.ready);
}

TEST(NodeDecode, NodeWithoutConditionsIsNotReady) {
  auto node = decodeOk<NodeCodec>(R"({"metadata": {"name": "n"}})");
  EXPECT_FALSE(node.ready);
  EXPECT_EQ(node.activeMode, model::NodeMode::Unset);
}

TEST(NodeDecode, UnknownModeLabelIsKeptAsUnknownForTheModelToRefuse) {
  auto node =
      decodeOk<NodeCodec>(R"({"metadata": {"name": "n", "labels": {"kube-dc.com/gpu.workload-mode": "turbo"}}})");
  EXPECT_EQ(node.activeMode, model::NodeMode::Unknown);
}

TEST(NodeDecode, NullFieldsReadAsAbsent) {
  auto node = decodeOk<NodeCodec>(R"({"metadata": {"name": "n", "labels": null, "annotations": null,
    "creationTimestamp": null}, "spec": null, "status": {"allocatable": null, "conditions": null}})");
  EXPECT_EQ(node.name, "n");
  EXPECT_TRUE(node.allocatable.empty());
}

TEST(NodeDecode, InventoryAnnotationListsParentsAndSlots) {
  auto node = decodeOk<NodeCodec>(R"({"metadata": {"name": "gpu-2", "annotations": {"gpu.tally.dev/inventory":
    "{\"parents\":[{\"id\":\"gpu0\",\"healthy\":true,\"types\":{\"nvidia.com/A100-10C\":{\"total\":4,\"created\":1,\"available\":3}}},{\"id\":\"gpu1\",\"healthy\":false,\"types\":{}}]}"}}})");
  ASSERT_TRUE(node.inventory.has_value());
  ASSERT_EQ(node.inventory->size(), 2u);
  const auto& first = (*node.inventory)[0];
  EXPECT_EQ(first.id, "gpu0");
  EXPECT_TRUE(first.healthy);
  EXPECT_EQ(first.types.at("nvidia.com/A100-10C"), (model::VgpuSlots{4, 1, 3}));
  EXPECT_FALSE((*node.inventory)[1].healthy);
}

TEST(NodeDecode, InventoryParentWithoutHealthyIsUnhealthy) {
  auto parents = decodeInventory(R"({"parents":[{"id":"gpu0","types":{}}]})");
  ASSERT_TRUE(parents) << parents.error().describe();
  EXPECT_FALSE((*parents)[0].healthy);
}

TEST(NodeDecode, MalformedInventoryNamesNodeAndAnnotation) {
  auto error = decodeError<NodeCodec>(
      R"({"metadata": {"name": "gpu-3", "annotations": {"gpu.tally.dev/inventory": "{\"parents\":[{\"id\":"}}})");
  EXPECT_EQ(error.item, "Node gpu-3");
  EXPECT_EQ(error.field.rfind("metadata.annotations[gpu.tally.dev/inventory]", 0), 0u) << error.field;
}

TEST(NodeDecode, InventorySlotOfWrongTypeNamesTheSlot) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {"name": "gpu-3", "annotations": {"gpu.tally.dev/inventory":
    "{\"parents\":[{\"id\":\"a\",\"healthy\":true,\"types\":{\"nvidia.com/A100-10C\":{\"total\":\"many\"}}}]}"}}})");
  EXPECT_EQ(error.item, "Node gpu-3");
  EXPECT_EQ(error.field, "metadata.annotations[gpu.tally.dev/inventory].parents[0].types[nvidia.com/A100-10C].total");
  EXPECT_NE(error.message.find("malformed"), std::string::npos) << error.message;
}

TEST(NodeDecode, InventoryWithoutParentsIsAnError) {
  auto error =
      decodeError<NodeCodec>(R"({"metadata": {"name": "g", "annotations": {"gpu.tally.dev/inventory": "{}"}}})");
  EXPECT_EQ(error.field, "metadata.annotations[gpu.tally.dev/inventory].parents");
}

TEST(NodeDecode, InventoryHealthyAsStringIsAnError) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {"name": "g", "annotations": {"gpu.tally.dev/inventory":
    "{\"parents\":[{\"healthy\":\"yes\"}]}"}}})");
  EXPECT_EQ(error.field, "metadata.annotations[gpu.tally.dev/inventory].parents[0].healthy");
  EXPECT_EQ(error.message, "expected true or false");
}

TEST(NodeDecode, InventoryWithTrailingGarbageIsAnError) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {"name": "g", "annotations": {"gpu.tally.dev/inventory":
    "{\"parents\":[]} x"}}})");
  EXPECT_EQ(error.item, "Node g");
}

TEST(NodeDecode, FractionalGpuAllocatableNamesTheResource) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {"name": "gpu-4"},
    "status": {"allocatable": {"nvidia.com/GH100_H200_SXM_141GB": "500m"}}})");
  EXPECT_EQ(error.item, "Node gpu-4");
  EXPECT_EQ(error.field, "status.allocatable[nvidia.com/GH100_H200_SXM_141GB]");
  EXPECT_NE(error.message.find("not a whole number"), std::string::npos);
}

TEST(NodeDecode, HugeAllocatableIsOutOfRange) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {"name": "g"},
    "status": {"allocatable": {"nvidia.com/gpu": 123456789012345678901234567890}}})");
  EXPECT_EQ(error.field, "status.allocatable[nvidia.com/gpu]");
}

TEST(NodeDecode, WrongTypesNameTheField) {
  EXPECT_EQ(decodeError<NodeCodec>(R"({"metadata": {"name": "g"}, "spec": {"unschedulable": "yes"}})").field,
            "spec.unschedulable");
  EXPECT_EQ(decodeError<NodeCodec>(R"({"metadata": {"name": 7}})").field, "metadata.name");
  EXPECT_EQ(decodeError<NodeCodec>(R"({"metadata": {"name": "g", "labels": {"a": 1}}})").field, "metadata.labels[a]");
  EXPECT_EQ(decodeError<NodeCodec>(R"({"metadata": {"name": "g"}, "status": {"conditions": {}}})").field,
            "status.conditions");
  EXPECT_EQ(decodeError<NodeCodec>(R"([1, 2])").message, "expected an object");
}

TEST(NodeDecode, MissingNameIsAnError) {
  auto error = decodeError<NodeCodec>(R"({"metadata": {}})");
  EXPECT_EQ(error.item, "Node");
  EXPECT_EQ(error.field, "metadata.name");
}

}  // namespace
}  // namespace tally::codec
