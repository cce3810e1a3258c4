#include <gtest/gtest.h>

#include "decode_test_support.hpp"
#include "tally/codec/json_text.hpp"

namespace tally::codec {
namespace {

using testing::decodeError;
using testing::decodeOk;

TEST(NamespaceDecode, HncTreeLabelsBecomeAncestorDepths) {
  auto ns = decodeOk<NamespaceCodec>(R"({"metadata": {"name": "acme-research", "labels": {
    "acme.tree.hnc.x-k8s.io/depth": "1", "acme-research.tree.hnc.x-k8s.io/depth": "0",
    "kubernetes.io/metadata.name": "acme-research"}}})");
  EXPECT_EQ(ns.name, "acme-research");
  EXPECT_EQ(ns.tree, (std::map<std::string, int>{{"acme", 1}, {"acme-research", 0}}));
  EXPECT_FALSE(ns.deleting);
}

TEST(NamespaceDecode, EntitlementLabelsOnlyWhenTrue) {
  auto ns = decodeOk<NamespaceCodec>(R"({"metadata": {"name": "acme", "labels": {
    "gpu.tally.dev/entitled-nvidia-a100-10c": "true", "gpu.tally.dev/entitled-nvidia-l40": "false"}}})");
  EXPECT_EQ(ns.entitledClasses, std::vector<std::string>{"nvidia-a100-10c"});
}

TEST(NamespaceDecode, DeletionTimestampMeansDeleting) {
  auto ns = decodeOk<NamespaceCodec>(R"({"metadata": {"name": "old", "deletionTimestamp": "2026-01-01T00:00:00Z"}})");
  EXPECT_TRUE(ns.deleting);
}

TEST(NamespaceDecode, MalformedDepthNamesTheLabel) {
  auto error =
      decodeError<NamespaceCodec>(R"({"metadata": {"name": "x", "labels": {"acme.tree.hnc.x-k8s.io/depth": "one"}}})");
  EXPECT_EQ(error.item, "Namespace x");
  EXPECT_EQ(error.field, "metadata.labels[acme.tree.hnc.x-k8s.io/depth]");
}

TEST(HierarchicalResourceQuotaDecode, KeepsGpuKeysOfSpecAndStatus) {
  auto hrq = decodeOk<HierarchicalResourceQuotaCodec>(R"({"apiVersion": "hnc.x-k8s.io/v1alpha2",
    "kind": "HierarchicalResourceQuota", "metadata": {"name": "plan-quota", "namespace": "acme"},
    "spec": {"hard": {"requests.nvidia.com/GH100_H200_SXM_141GB": "6", "requests.cpu": "1500m",
                      "requests.nvidia.com/gpumem": "16Gi"}},
    "status": {"hard": {"requests.nvidia.com/GH100_H200_SXM_141GB": "5"},
               "used": {"requests.nvidia.com/GH100_H200_SXM_141GB": "3", "requests.memory": "1.5Gi"}}})");
  EXPECT_EQ(hrq.ns, "acme");
  EXPECT_EQ(hrq.name, "plan-quota");
  EXPECT_EQ(hrq.hard.get("requests.nvidia.com/GH100_H200_SXM_141GB"), 6);
  EXPECT_EQ(hrq.hard.get("requests.nvidia.com/gpumem"), 17179869184);
  EXPECT_FALSE(hrq.hard.contains("requests.cpu"));
  EXPECT_EQ(hrq.statusHard.get("requests.nvidia.com/GH100_H200_SXM_141GB"), 5);
  EXPECT_EQ(hrq.statusUsed.get("requests.nvidia.com/GH100_H200_SXM_141GB"), 3);
  EXPECT_EQ(hrq.statusUsed.size(), 1u);
}

TEST(HierarchicalResourceQuotaDecode, FractionalGpuHardNamesTheKey) {
  auto error = decodeError<HierarchicalResourceQuotaCodec>(R"({"metadata": {"name": "plan-quota", "namespace": "acme"},
    "spec": {"hard": {"requests.nvidia.com/gpu": "2.5"}}})");
  EXPECT_EQ(error.item, "HierarchicalResourceQuota acme/plan-quota");
  EXPECT_EQ(error.field, "spec.hard[requests.nvidia.com/gpu]");
}

TEST(ResourceQuotaDecode, ReadsHardAndUsed) {
  auto quota = decodeOk<ResourceQuotaCodec>(R"({"metadata": {"name": "project-quota", "namespace": "acme-research"},
    "spec": {"hard": {"requests.nvidia.com/gpu": "4", "pods": "10"}},
    "status": {"hard": {"requests.nvidia.com/gpu": "4"}, "used": {"requests.nvidia.com/gpu": "1"}}})");
  EXPECT_EQ(quota.hard.get("requests.nvidia.com/gpu"), 4);
  EXPECT_FALSE(quota.hard.contains("pods"));
  EXPECT_EQ(quota.used.get("requests.nvidia.com/gpu"), 1);
}

TEST(OrganizationDecode, AddonsAnnotationAndAcceleratorStatus) {
  auto org = decodeOk<OrganizationCodec>(R"({"apiVersion": "kube-dc.com/v1", "kind": "Organization",
    "metadata": {"name": "acme", "namespace": "acme", "annotations": {
      "billing.kube-dc.com/addons": "[{\"addonId\":\"gpu-h200\",\"quantity\":4},{\"addonId\":\"gpu-res\",\"quantity\":\"2\"}]"}},
    "status": {"quotaUsage": {"accelerators": {
      "nvidia-h200-passthrough": {"devices": {"hard": 6, "used": "3"}},
      "nvidia-v100-shared": {"shares": {"hard": 2, "used": 1}, "memoryMiB": {"hard": "16Gi", "used": 0},
                             "corePercent": {"hard": 50}}}}}})");
  EXPECT_EQ(org.ns, "acme");
  EXPECT_EQ(org.name, "acme");
  ASSERT_EQ(org.addons.size(), 2u);
  EXPECT_EQ(org.addons[0], (model::AddonAssignment{"gpu-h200", 4}));
  EXPECT_EQ(org.addons[1], (model::AddonAssignment{"gpu-res", 2}));
  const auto& h200 = org.acceleratorStatus.at("nvidia-h200-passthrough");
  EXPECT_EQ(h200.devices, (model::HardUsed{6, 3}));
  EXPECT_FALSE(h200.shares.has_value());
  const auto& shared = org.acceleratorStatus.at("nvidia-v100-shared");
  EXPECT_EQ(shared.shares, (model::HardUsed{2, 1}));
  EXPECT_EQ(shared.memoryMiB->hard, 17179869184);
  EXPECT_EQ(shared.corePercent, (model::HardUsed{50, 0}));
}

TEST(OrganizationDecode, AssignmentWithoutQuantityIsOne) {
  auto addons = decodeAddonAssignments(R"([{"addonId":"a"}])");
  ASSERT_TRUE(addons);
  EXPECT_EQ((*addons)[0].quantity, 1);
}

TEST(OrganizationDecode, MalformedAddonsAnnotationNamesOrganizationAndField) {
  auto error = decodeError<OrganizationCodec>(R"({"metadata": {"name": "acme", "namespace": "acme", "annotations": {
    "billing.kube-dc.com/addons": "[{\"addonId\":\"a\",\"quantity\":-1}]"}}})");
  EXPECT_EQ(error.item, "Organization acme/acme");
  EXPECT_EQ(error.field, "metadata.annotations[billing.kube-dc.com/addons][0].quantity");
  EXPECT_NE(error.message.find("negative"), std::string::npos);
}

TEST(OrganizationDecode, AddonsAnnotationThatIsNotJsonIsAnError) {
  auto error = decodeError<OrganizationCodec>(R"({"metadata": {"name": "acme", "annotations": {
    "billing.kube-dc.com/addons": "gpu-h200 x4"}}})");
  EXPECT_EQ(error.field, "metadata.annotations[billing.kube-dc.com/addons]");
}

TEST(OrganizationDecode, AddonWithoutIdIsAnError) {
  auto addons = decodeAddonAssignments(R"([{"quantity":1}])");
  ASSERT_FALSE(addons);
  EXPECT_EQ(addons.error().field, "[0].addonId");
}

TEST(OrganizationDecode, ClusterScopedOrganizationLivesInItsOwnNamespace) {
  auto org = decodeOk<OrganizationCodec>(R"({"metadata": {"name": "globex"}})");
  EXPECT_EQ(org.ns, "globex");
}

TEST(BillingPlansDecode, AddonsWithGrantsPerProfile) {
  auto plans = decodeBillingPlansYaml(R"(addons:
  gpu-h200-reserved:
    selfService: false
    gpu:
      nvidia-h200-passthrough:
        devices: 1
  gpu-v100-share:
    gpu:
      nvidia-v100-shared: {shares: 1, memoryMiB: 8Gi, corePercent: 25}
  old:
    disabled: true
    gpu: {}
  cpu-pack:
    cpu: 4
)");
  ASSERT_TRUE(plans) << plans.error().describe();
  ASSERT_EQ(plans->addons.size(), 4u);
  const auto& reserved = plans->addons.at("gpu-h200-reserved");
  EXPECT_EQ(reserved.id, "gpu-h200-reserved");
  EXPECT_FALSE(reserved.selfService);
  EXPECT_FALSE(reserved.disabled);
  EXPECT_EQ(reserved.gpu.at("nvidia-h200-passthrough").devices, 1);
  const auto& share = plans->addons.at("gpu-v100-share");
  EXPECT_TRUE(share.selfService);
  EXPECT_EQ(share.gpu.at("nvidia-v100-shared"), (model::GpuGrant{0, 1, 8589934592, 25}));
  EXPECT_TRUE(plans->addons.at("old").disabled);
  EXPECT_TRUE(plans->addons.at("cpu-pack").gpu.empty());
}

TEST(BillingPlansDecode, BadGrantNamesThePath) {
  auto plans = decodeBillingPlansYaml("addons:\n  a:\n    gpu:\n      p:\n        devices: 0.5\n");
  ASSERT_FALSE(plans);
  EXPECT_EQ(plans.error().field, "addons.a.gpu.p.devices");
}

TEST(BillingPlansDecode, BadBooleanNamesThePath) {
  auto plans = decodeBillingPlansYaml("addons:\n  a:\n    selfService: maybe\n");
  ASSERT_FALSE(plans);
  EXPECT_EQ(plans.error().field, "addons.a.selfService");
}

TEST(BillingPlansDecode, AnAliasBombIsRefusedNotExpanded) {
  std::string text = "addons:\n  a: &a0 {gpu: {}}\n";
  for (int i = 1; i < 9; ++i) {
    text += "  b" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  auto plans = decodeBillingPlansYaml(text);
  ASSERT_FALSE(plans);
  EXPECT_NE(plans.error().message.find("more than 100000 nodes"), std::string::npos) << plans.error().message;
}

TEST(BillingPlansDecode, MalformedYamlIsAnError) {
  auto plans = decodeBillingPlansYaml("addons: [unclosed\n");
  ASSERT_FALSE(plans);
  EXPECT_NE(plans.error().message.find("malformed YAML"), std::string::npos);
}

TEST(BillingPlansDecode, AddonsThatAreAListAreAnError) {
  auto plans = decodeBillingPlansYaml("addons:\n  - a\n");
  ASSERT_FALSE(plans);
  EXPECT_EQ(plans.error().field, "addons");
}

TEST(BillingPlansDecode, OnlyTheBillingPlansConfigMapIsRead) {
  auto other = decodeOk<BillingPlansCodec>(R"({"metadata": {"name": "other", "namespace": "kube-dc"},
    "data": {"plans.yaml": "addons: [broken"}})");
  EXPECT_FALSE(other.has_value());
  auto plans = decodeOk<BillingPlansCodec>(R"({"metadata": {"name": "billing-plans", "namespace": "kube-dc"},
    "data": {"plans.yaml": "addons:\n  a:\n    gpu:\n      p: {devices: 2}\n"}})");
  ASSERT_TRUE(plans.has_value());
  EXPECT_EQ(plans->addons.at("a").gpu.at("p").devices, 2);
}

TEST(BillingPlansDecode, BrokenPlansNameTheConfigMapAndKey) {
  auto error = decodeError<BillingPlansCodec>(R"({"metadata": {"name": "billing-plans", "namespace": "kube-dc"},
    "data": {"plans.yaml": "addons:\n  a:\n    disabled: 3\n"}})");
  EXPECT_EQ(error.item, "ConfigMap kube-dc/billing-plans");
  EXPECT_EQ(error.field, "data[plans.yaml].addons.a.disabled");
}

TEST(BillingPlansDecode, MissingPlansKeyIsAnError) {
  auto error =
      decodeError<BillingPlansCodec>(R"({"metadata": {"name": "billing-plans", "namespace": "kube-dc"}, "data": {}})");
  EXPECT_EQ(error.field, "data[plans.yaml]");
}

// The catalogue decoded from one ConfigMap, with the location configured.
std::optional<model::BillingPlans> plansAt(std::string_view json, const BillingPlansLocation& location) {
  std::optional<model::BillingPlans> plans;
  Status status = withJsonValue(json, "", [&](simdjson::ondemand::value value) -> Status {
    auto decoded = decodeBillingPlansConfigMap(value, nullptr, location);
    if (!decoded) return std::move(decoded).error();
    plans = std::move(decoded).value();
    return {};
  });
  EXPECT_TRUE(status) << status.error().describe();
  return plans;
}

TEST(BillingPlansDecode, ConfigMapAtTheConfiguredLocationIsTheCatalogue) {
  const BillingPlansLocation platform{"platform", "plans"};
  auto plans = plansAt(R"({"metadata": {"name": "plans", "namespace": "platform"},
    "data": {"plans.yaml": "addons:\n  a: {selfService: true}\n"}})",
                       platform);
  ASSERT_TRUE(plans.has_value());
  EXPECT_TRUE(plans->addons.at("a").selfService);
}

TEST(BillingPlansDecode, WithAnotherLocationConfiguredTheDefaultConfigMapIsIgnored) {
  EXPECT_FALSE(plansAt(R"({"metadata": {"name": "billing-plans", "namespace": "kube-dc"},
    "data": {"plans.yaml": "addons: {}"}})",
                       {"platform", "plans"}));
}

TEST(BillingPlansDecode, TheCodecReadsTheDefaultLocationOnly) {
  auto plans = decodeOk<BillingPlansCodec>(R"({"metadata": {"name": "plans", "namespace": "platform"},
    "data": {"plans.yaml": "addons: {}"}})");
  EXPECT_FALSE(plans.has_value());
}

TEST(BillingPlansLocation, NamespaceSlashNameIsParsed) {
  auto location = parseBillingPlansLocation("platform/plans");
  ASSERT_TRUE(location) << location.error().describe();
  EXPECT_EQ(*location, (BillingPlansLocation{"platform", "plans"}));
  EXPECT_EQ(location->describe(), "platform/plans");
  EXPECT_EQ(BillingPlansLocation{}.describe(), "kube-dc/billing-plans");
}

TEST(BillingPlansLocation, AMissingHalfOrAThirdPartIsAnErrorNamingTheText) {
  for (std::string_view bad : {"plans", "/plans", "platform/", "", "a/b/c"}) {
    auto location = parseBillingPlansLocation(bad);
    ASSERT_FALSE(location) << bad;
    EXPECT_NE(location.error().message.find("\"" + std::string(bad) + "\""), std::string::npos)
        << location.error().describe();
  }
}

}  // namespace
}  // namespace tally::codec
