#include "tally/codec/snapshot.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tally::codec {
namespace {

DecodeError loadError(std::string_view json) {
  auto snapshot = loadSnapshot(json);
  if (snapshot) {
    ADD_FAILURE() << "snapshot unexpectedly loaded";
    return {};
  }
  return snapshot.error();
}

TEST(Snapshot, KubectlListOfMixedKindsFillsTheCluster) {
  auto snapshot = loadSnapshot(R"({"apiVersion": "v1", "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "acme"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "acme"}},
    {"apiVersion": "hnc.x-k8s.io/v1alpha2", "kind": "HierarchicalResourceQuota", "metadata": {"name": "plan-quota", "namespace": "acme"}},
    {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "project-quota", "namespace": "acme"}},
    {"apiVersion": "gpu.tally.dev/v1alpha1", "kind": "GPUDeviceClass", "metadata": {"name": "h"},
     "spec": {"allocation": "passthrough", "resourceName": "nvidia.com/H200"}},
    {"apiVersion": "gpu.tally.dev/v1alpha1", "kind": "GPUDevice", "metadata": {"name": "d", "namespace": "acme"}, "spec": {"class": "h"}},
    {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "vm", "namespace": "acme"}},
    {"apiVersion": "kube-dc.com/v1", "kind": "Organization", "metadata": {"name": "acme", "namespace": "acme"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "billing-plans", "namespace": "kube-dc"},
     "data": {"plans.yaml": "addons: {}"}},
    {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kubevirt"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "t"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "kube-dc"}}
  ], "kind": "List", "metadata": {"resourceVersion": ""}})");
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  const model::Cluster& cluster = snapshot->cluster;
  EXPECT_TRUE(cluster.nodes.contains("gpu-1"));
  EXPECT_TRUE(cluster.pods.contains("acme/p"));
  EXPECT_TRUE(cluster.namespaces.contains("acme"));
  EXPECT_TRUE(cluster.hrqs.contains("acme/plan-quota"));
  EXPECT_TRUE(cluster.quotas.contains("acme/project-quota"));
  EXPECT_TRUE(cluster.classes.contains("h"));
  EXPECT_TRUE(cluster.devices.contains("acme/d"));
  EXPECT_TRUE(cluster.vmis.contains("acme/vm"));
  EXPECT_TRUE(cluster.organizations.contains("acme/acme"));
  EXPECT_TRUE(cluster.plans.has_value());
  EXPECT_TRUE(cluster.permittedHostDevices.has_value());
  EXPECT_EQ(snapshot->skipped, (std::map<std::string, std::size_t>{{"ConfigMap", 1}, {"Service", 2}}));
  EXPECT_EQ(snapshot->decoded.at("Node"), 1u);
  EXPECT_EQ(snapshot->decoded.size(), 11u);
}

TEST(Snapshot, WithoutKubeVirtOrPlansTheyStayUnknown) {
  auto snapshot = loadSnapshot(R"({"kind": "List", "items": []})");
  ASSERT_TRUE(snapshot);
  EXPECT_FALSE(snapshot->cluster.plans.has_value());
  EXPECT_FALSE(snapshot->cluster.permittedHostDevices.has_value());
}

TEST(Snapshot, TypedListItemsTakeTheirKindFromTheList) {
  auto snapshot = loadSnapshot(R"({"kind": "NodeList", "apiVersion": "v1", "metadata": {},
    "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]})");
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  EXPECT_EQ(snapshot->cluster.nodes.size(), 2u);
}

TEST(Snapshot, ItemsOfCustomListsNeedTheGroupToo) {
  auto snapshot = loadSnapshot(R"({"kind": "GPUDeviceList", "apiVersion": "gpu.tally.dev/v1alpha1",
    "items": [{"metadata": {"name": "d", "namespace": "n"}, "spec": {"class": "c"}}]})");
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  EXPECT_TRUE(snapshot->cluster.devices.contains("n/d"));
}

TEST(Snapshot, ASingleObjectIsASnapshotOfOne) {
  auto snapshot = loadSnapshot(R"({"metadata": {"name": "n"}, "kind": "Node", "apiVersion": "v1"})");
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  EXPECT_TRUE(snapshot->cluster.nodes.contains("n"));
}

TEST(Snapshot, SameKindInAnotherGroupIsSkipped) {
  auto snapshot = loadSnapshot(R"({"kind": "List", "items": [
    {"apiVersion": "example.com/v1", "kind": "Organization", "metadata": {"name": "x"}},
    {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "Node", "metadata": {"name": "y"}}]})");
  ASSERT_TRUE(snapshot);
  EXPECT_TRUE(snapshot->cluster.organizations.empty());
  EXPECT_TRUE(snapshot->cluster.nodes.empty());
  EXPECT_EQ(snapshot->skipped.at("Organization"), 1u);
}

TEST(Snapshot, BrokenItemIsNamedByIndexKindNameAndField) {
  auto error = loadError(R"({"kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ok"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "acme"},
     "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}}]})");
  EXPECT_EQ(error.item, "items[1] Pod acme/p");
  EXPECT_EQ(error.field, "spec.containers[0].resources.limits[nvidia.com/gpu]");
  EXPECT_EQ(error.describe(),
            "items[1] Pod acme/p: spec.containers[0].resources.limits[nvidia.com/gpu]: quantity \"1.5\" is not a whole "
            "number");
}

TEST(Snapshot, NotJsonIsAnError) {
  for (std::string_view text : {"", "hello", "apiVersion: v1\nkind: List\n", "{", "[", "{\"kind\": }", "nul"}) {
    auto snapshot = loadSnapshot(text);
    EXPECT_FALSE(snapshot) << text;
    if (!snapshot) {
      EXPECT_EQ(snapshot.error().item, "snapshot") << text;
    }
  }
}

TEST(Snapshot, TruncatedJsonIsAnError) {
  const std::string full = R"({"kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a",
    "labels": {"kube-dc.com/gpu.workload-mode": "vm-passthrough"}}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}}]})";
  ASSERT_TRUE(loadSnapshot(full));
  for (std::size_t cut = 0; cut < full.size(); ++cut) {
    EXPECT_FALSE(loadSnapshot(full.substr(0, cut))) << "cut at " << cut << ": " << full.substr(0, cut);
  }
}

TEST(Snapshot, TrailingContentIsAnError) {
  EXPECT_FALSE(loadSnapshot(R"({"kind": "List", "items": []} {"kind": "List", "items": []})"));
  EXPECT_FALSE(loadSnapshot(R"({"kind": "List", "items": []}])"));
  EXPECT_FALSE(loadSnapshot(R"({"kind": "List", "items": []}],[{"kind": "Node"})"));
  EXPECT_FALSE(loadSnapshot(R"({"kind": "List", "items": []}, 1)"));
}

TEST(Snapshot, TopLevelArrayOrScalarIsAnError) {
  EXPECT_FALSE(loadSnapshot("[]"));
  EXPECT_FALSE(loadSnapshot("42"));
  EXPECT_FALSE(loadSnapshot("\"List\""));
}

TEST(Snapshot, ItemWithoutKindOrNotAnObjectIsAnError) {
  EXPECT_EQ(loadError(R"({"kind": "List", "items": [{"metadata": {"name": "a"}}]})").describe(),
            "items[0]: kind: missing");
  EXPECT_EQ(loadError(R"({"kind": "List", "items": [3]})").item, "items[0]");
  EXPECT_EQ(loadError(R"({"kind": "List", "items": [{"kind": 3}]})").field, "kind");
}

TEST(Snapshot, ListWithoutItemsOrWithWrongItemsIsAnError) {
  EXPECT_EQ(loadError(R"({"kind": "List"})").field, "items");
  EXPECT_EQ(loadError(R"({"kind": "List", "items": {}})").field, "items");
}

TEST(Snapshot, DuplicateObjectsAreAnError) {
  auto error = loadError(R"({"kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}},
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}]})");
  EXPECT_EQ(error.item, "items[1] Pod a/p");
  EXPECT_NE(error.message.find("duplicate"), std::string::npos);
}

TEST(Snapshot, HugeNumbersAreOutOfRange) {
  auto error = loadError(R"({"kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
    "status": {"allocatable": {"nvidia.com/gpu": 1e400}}}]})");
  EXPECT_EQ(error.item, "items[0] Node n");
  EXPECT_EQ(error.field, "status.allocatable[nvidia.com/gpu]");
}

TEST(Snapshot, InvalidUtf8InAStringIsAnError) {
  EXPECT_FALSE(
      loadSnapshot("{\"kind\": \"List\", \"items\": [{\"kind\": \"Node\", \"metadata\": {\"name\": \"\xff\"}}]}"));
}

TEST(Snapshot, DeeplyNestedUnreadValuesAreSkippedWithoutRecursion) {
  std::string deep =
      R"({"kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "x": )";
  deep += std::string(5000, '[') + std::string(5000, ']') + "}]}";
  auto snapshot = loadSnapshot(deep);
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  EXPECT_TRUE(snapshot->cluster.nodes.contains("n"));
}

TEST(Snapshot, DeeplyNestedReadValuesAreAnError) {
  std::string deep = R"({"kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n",
    "labels": )";
  deep += std::string(5000, '[') + std::string(5000, ']') + "}}]}";
  auto snapshot = loadSnapshot(deep);
  ASSERT_FALSE(snapshot);
  EXPECT_EQ(snapshot.error().field, "metadata.labels");
}

// simdjson cannot rewind an empty object it has already left; it must not be read twice.
TEST(Snapshot, EmptyObjectsAreNeverReadTwice) {
  EXPECT_EQ(loadError("{}").describe(), "snapshot: kind: missing");
  auto typed = loadError(R"({"kind": "NodeList", "apiVersion": "v1", "items": [{}]})");
  EXPECT_EQ(typed.item, "items[0] Node");
  EXPECT_EQ(typed.field, "metadata.name");
  auto skipped = loadSnapshot(R"({"kind": "ServiceList", "apiVersion": "v1", "items": [{}, {}]})");
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->skipped.at("Service"), 2u);
  EXPECT_FALSE(loadSnapshot(std::string("{}") + std::string(50, '}') + R"("kind": "Node"}]y)"));
}

TEST(Snapshot, ExampleSnapshotDecodes) {
  std::ifstream in(std::string(TALLY_EXAMPLES_DIR) + "/snapshot.json");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto snapshot = loadSnapshot(text.str());
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  const model::Cluster& cluster = snapshot->cluster;
  EXPECT_EQ(cluster.classes.size(), 3u);
  EXPECT_EQ(cluster.nodes.size(), 10u);
  EXPECT_EQ(cluster.organizations.size(), 2u);
  EXPECT_EQ(cluster.devices.at("globex-ml/old-gpu").phase, model::DevicePhase::Lost);
  EXPECT_EQ(cluster.vmis.at("acme-research/train-vm").activePods.size(), 1u);
  EXPECT_TRUE(cluster.plans->addons.contains("gpu-h200-reserved"));
  ASSERT_TRUE(cluster.nodes.at("gpu-a100-01").inventory.has_value());
  EXPECT_FALSE(cluster.nodes.at("gpu-a100-01").inventory->at(1).healthy);
  EXPECT_EQ(snapshot->skipped,
            (std::map<std::string, std::size_t>{{"ConfigMap", 1}, {"Deployment", 1}, {"Service", 1}}));
}

constexpr std::string_view kPlatformPlans = R"({"kind": "List", "items": [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plans", "namespace": "platform"},
     "data": {"plans.yaml": "addons:\n  gpu-h200-reserved:\n    selfService: false\n    gpu:\n      h200: {devices: 1}\n"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "billing-plans", "namespace": "kube-dc"},
     "data": {"plans.yaml": "addons: {}"}}]})";

TEST(Snapshot, CatalogueInAConfiguredConfigMapIsDecodedWhenSoConfigured) {
  SnapshotOptions options;
  options.billingPlans = {"platform", "plans"};
  auto snapshot = loadSnapshot(kPlatformPlans, options);
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  ASSERT_TRUE(snapshot->cluster.plans.has_value());
  EXPECT_EQ(snapshot->cluster.plans->addons.at("gpu-h200-reserved").gpu.at("h200").devices, 1);
  // The ConfigMap at the default location is then just another ConfigMap.
  EXPECT_EQ(snapshot->skipped, (std::map<std::string, std::size_t>{{"ConfigMap", 1}}));
}

TEST(Snapshot, CatalogueInAnotherConfigMapIsIgnoredByDefault) {
  auto snapshot = loadSnapshot(kPlatformPlans);
  ASSERT_TRUE(snapshot) << snapshot.error().describe();
  ASSERT_TRUE(snapshot->cluster.plans.has_value());
  EXPECT_TRUE(snapshot->cluster.plans->addons.empty()) << "read from kube-dc/billing-plans, not platform/plans";
  EXPECT_EQ(snapshot->skipped, (std::map<std::string, std::size_t>{{"ConfigMap", 1}}));
}

TEST(Snapshot, SecondConfiguredCatalogueIsADuplicateNamingTheConfiguredLocation) {
  SnapshotOptions options;
  options.billingPlans = {"platform", "plans"};
  const std::string twice = R"({"kind": "List", "items": [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plans", "namespace": "platform"}, "data": {"plans.yaml": ""}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plans", "namespace": "platform"}, "data": {"plans.yaml": ""}}]})";
  auto snapshot = loadSnapshot(twice, options);
  ASSERT_FALSE(snapshot);
  EXPECT_NE(snapshot.error().item.find("ConfigMap platform/plans"), std::string::npos) << snapshot.error().describe();
}

}  // namespace
}  // namespace tally::codec
