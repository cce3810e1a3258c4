// The launcher pod and raw GPU pod webhooks on hand-built snapshots, each
// review decoded from its AdmissionReview text as the API server sends it.

#include "tally/controller/pod_webhooks.hpp"

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace model::testing;
using runtime::admission::AdmissionResponse;
using runtime::admission::JsonPatch;

constexpr std::string_view kTermsPath =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
constexpr std::string_view kPin = R"({"key":"metadata.name","operator":"In","values":["gpu-2"]})";

// A pod as the API server sends it at CREATE: no uid, a generated name.
// `spec` opens spec: by default a pod the placement door already pointed at
// tally-scheduler (the validating door sees pods after every mutation).
constexpr std::string_view kOnTallysScheduler = R"("schedulerName":"tally-scheduler",)";
std::string podJson(const std::string& resources, const std::string& owner = "", const std::string& affinity = "",
                    std::string_view spec = kOnTallysScheduler) {
  std::string s = R"({"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"virt-launcher-train-",)"
                  R"("namespace":"acme-ml")";
  if (!owner.empty()) s += R"(,"ownerReferences":[)" + owner + "]";
  s += R"(},"spec":{)";
  s += spec;
  if (!affinity.empty()) s += R"("affinity":)" + affinity + ",";
  s += R"("containers":[{"name":"c","resources":)" + resources + "}]}}";
  return s;
}

std::string vmiOwner(const std::string& uid) {
  return R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"train","uid":")" + uid +
         R"(","controller":true,"blockOwnerDeletion":true})";
}

std::string gpuResources(std::int64_t count, std::string_view resource = kH200) {
  const std::string n = std::to_string(count);
  return R"({"requests":{")" + std::string(resource) + R"(":")" + n + R"("},"limits":{")" + std::string(resource) +
         R"(":")" + n + R"("}})";
}

std::string required(const std::string& terms) {
  return R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":)" + terms + "}}}";
}

std::string reviewJson(const std::string& object, bool dryRun = false) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},)"
         R"("resource":{"group":"","version":"v1","resource":"pods"},)"
         R"("namespace":"acme-ml","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kubevirt:kubevirt-controller"},)"
         R"("dryRun":)" +
         std::string(dryRun ? "true" : "false") + R"(,"object":)" + object + "}}";
}

struct PodWebhooks : ::testing::Test {
  std::set<model::Kind> watched;
  std::unique_ptr<state::Writer> writer;
  PodWebhookOptions options;

  void SetUp() override {
    build();
    put(passthroughClass());
    put(gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
    put(gpuNode("gpu-2", model::NodeMode::VmPassthrough, kH200, 2));
    put(ns("acme"));
    put(ns("acme-ml", {"acme"}));
  }
  void build() {
    state::Writer::Options o;
    o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
    o.watched = watched;
    writer = std::make_unique<state::Writer>(o);
  }
  template <class T>
  void put(T object) {
    writer->upsert(state::Object(std::move(object)));
  }
  // VMI acme-ml/train (uid vmi-1) holding devices on gpu-2, or still Pending ones.
  void trainVmi(model::DevicePhase phase = model::DevicePhase::Attached) {
    model::VirtualMachineInstance vmi;
    vmi.ns = "acme-ml";
    vmi.name = "train";
    vmi.uid = "vmi-1";
    put(vmi);
    for (const char* name : {"g0", "g1"}) {
      auto d = device("acme-ml", name, "h200", 1, phase, phase == model::DevicePhase::Pending ? "" : "gpu-2");
      d.attachedTo = model::ObjectRef{"acme-ml", "train", "vmi-1"};
      put(d);
    }
  }

  static runtime::admission::AdmissionRequest request(const std::string& review) {
    auto decoded = runtime::admission::decodeAdmissionReview(review);
    EXPECT_TRUE(decoded) << (decoded ? "" : decoded.error().message);
    if (!decoded) return runtime::admission::AdmissionRequest();
    return std::move(decoded).value();
  }
  AdmissionResponse launcher(const std::string& pod) {
    writer->flush();
    return reviewLauncherPod(*writer->snapshots().read(), request(reviewJson(pod)), options).response;
  }
  AdmissionResponse gpuPod(const std::string& pod, bool dryRun = false) {
    writer->flush();
    return reviewGpuPod(*writer->snapshots().read(), request(reviewJson(pod, dryRun)), options).response;
  }
  AdmissionResponse route(const std::string& pod) {
    writer->flush();
    return reviewGpuPodRoute(*writer->snapshots().read(), request(reviewJson(pod)), options).response;
  }
  static bool refusedWith(const AdmissionResponse& r, std::string_view code) {
    return !r.allowed && r.message.rfind(kRefusalPrefix, 0) == 0 &&
           r.message.find("[" + std::string(code) + "]") != std::string::npos;
  }
  static const JsonPatch::Operation& onlyOp(const AdmissionResponse& r) {
    EXPECT_EQ(r.patch.operations().size(), 1u) << r.patch.toJson();
    return r.patch.operations().front();
  }
};

TEST_F(PodWebhooks, LauncherWithoutAffinityGetsARequiredAffinityToTheDevicesNode) {
  trainVmi();
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1")));
  ASSERT_TRUE(r.allowed) << r.message;
  const auto& op = onlyOp(r);
  EXPECT_EQ(op.op, JsonPatch::Op::kAdd);
  EXPECT_EQ(op.path, "/spec/affinity");
  EXPECT_EQ(op.valueJson, required("[{\"matchFields\":[" + std::string(kPin) + "]}]"));
}

TEST_F(PodWebhooks, LauncherWithAffinityButNoNodeAffinityGetsOne) {
  trainVmi();
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), R"({"podAntiAffinity":{}})"));
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_EQ(onlyOp(r).path, "/spec/affinity/nodeAffinity");
}

TEST_F(PodWebhooks, EveryTermOfAnExistingRequiredAffinityGetsThePin) {
  trainVmi();
  const std::string terms = R"([{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]},)"
                            R"({"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]}])";
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), required(terms)));
  ASSERT_TRUE(r.allowed) << r.message;
  const auto& ops = r.patch.operations();
  ASSERT_EQ(ops.size(), 2u) << r.patch.toJson();
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(ops[i].op, JsonPatch::Op::kAdd);
    EXPECT_EQ(ops[i].path, std::string(kTermsPath) + "/" + std::to_string(i) + "/matchFields");
    EXPECT_EQ(ops[i].valueJson, "[" + std::string(kPin) + "]");
  }
}

TEST_F(PodWebhooks, ExistingMatchFieldsGetThePinAppended) {
  trainVmi();
  const std::string terms = R"([{"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["gpu-1"]}]}])";
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), required(terms)));
  ASSERT_TRUE(r.allowed) << r.message;
  const auto& op = onlyOp(r);
  EXPECT_EQ(op.path, std::string(kTermsPath) + "/0/matchFields/-");
  EXPECT_EQ(op.valueJson, kPin);
}

TEST_F(PodWebhooks, SecondCallOnAPinnedPodPatchesNothing) {
  trainVmi();
  observability::Registry registry;
  options = podWebhookMetrics(registry);
  auto first = launcher(podJson(gpuResources(2), vmiOwner("vmi-1")));
  ASSERT_TRUE(first.allowed) << first.message;
  // The pod as the first patch left it.
  const std::string pinned = onlyOp(first).valueJson;
  auto second = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), pinned));
  EXPECT_TRUE(second.allowed) << second.message;
  EXPECT_TRUE(second.patch.empty()) << second.patch.toJson();
  EXPECT_NE(registry.render().find("tally_controller_launcher_pods_pinned_total 1"), std::string::npos)
      << registry.render();
}

TEST_F(PodWebhooks, OnlyTheTermsWithoutThePinArePatched) {
  trainVmi();
  const std::string terms =
      "[{\"matchFields\":[" + std::string(kPin) + R"(]},{"matchExpressions":[{"key":"zone","operator":"Exists"}]}])";
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), required(terms)));
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_EQ(onlyOp(r).path, std::string(kTermsPath) + "/1/matchFields");
}

TEST_F(PodWebhooks, TermThatMatchesNoNodeIsNotWidenedByThePin) {
  trainVmi();
  const std::string terms = R"([{},{"matchExpressions":[{"key":"zone","operator":"Exists"}]}])";
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1"), required(terms)));
  ASSERT_TRUE(r.allowed) << r.message;
  EXPECT_EQ(onlyOp(r).path, std::string(kTermsPath) + "/1/matchFields");
}

TEST_F(PodWebhooks, LauncherOfUnplacedDevicesIsRefusedWithTheModelsReason) {
  trainVmi(model::DevicePhase::Pending);
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1")));
  EXPECT_TRUE(refusedWith(r, "DeviceUnavailable")) << r.message;
  EXPECT_NE(r.message.find("on no node yet"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, LauncherOfAVmiNotSeenYetIsRefusedAndTheCreatorRetries) {
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-404")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.message.rfind(kRefusalPrefix, 0), 0u) << r.message;
  EXPECT_NE(r.message.find("vmi/acme-ml/train (uid vmi-404)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("not seen yet"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("retries"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, LauncherWhileTheSnapshotIsNotSyncedIsRefusedNamingTheCaches) {
  watched = {model::Kind::VirtualMachineInstance, model::Kind::GpuDevice};
  build();
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1")));
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
  EXPECT_NE(r.message.find("VirtualMachineInstance"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("GPUDevice"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, LauncherOfAVmiWithoutTallyDevicesIsLeftUnchanged) {
  model::VirtualMachineInstance vmi;
  vmi.ns = "acme-ml";
  vmi.name = "train";
  vmi.uid = "vmi-1";
  put(vmi);
  auto r = launcher(podJson(gpuResources(2), vmiOwner("vmi-1")));
  EXPECT_TRUE(r.allowed) << r.message;
  EXPECT_TRUE(r.patch.empty());
}

TEST_F(PodWebhooks, PodWithoutAVmiOwnerIsLeftUnchangedEvenWhileStarting) {
  watched = {model::Kind::VirtualMachineInstance};
  build();
  auto r = launcher(podJson(gpuResources(2)));
  EXPECT_TRUE(r.allowed) << r.message;
  EXPECT_TRUE(r.patch.empty());
}

TEST_F(PodWebhooks, RawGpuPodOverABudgetIsRefusedNamingTheBudget) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 1));
  auto r = gpuPod(podJson(gpuResources(2)));
  EXPECT_TRUE(refusedWith(r, "BudgetExceeded")) << r.message;
  EXPECT_NE(r.message.find("plan-quota"), std::string::npos) << r.message;
  EXPECT_EQ(r.code, 403);
}

TEST_F(PodWebhooks, RefusalIsCountedByTheFrameUnderTheWebhooksName) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 1));
  writer->flush();
  observability::Registry registry;
  runtime::admission::WebhookOptions frame;
  frame.metrics = std::make_shared<runtime::admission::WebhookMetrics>(registry);
  const std::string name(kGpuPodWebhookName);
  auto answered = runtime::admission::answerReview(name, gpuPodWebhook(writer->snapshots(), options),
                                                   reviewJson(podJson(gpuResources(2))), frame);
  EXPECT_EQ(answered.status, 200);
  EXPECT_NE(registry.render().find(
                R"(tally_webhook_refusals_total{code="BudgetExceeded",operation="CREATE",webhook="gpu-pods"} 1)"),
            std::string::npos)
      << registry.render();
}

TEST_F(PodWebhooks, NamedRawGpuPodIsReviewedLikeAGeneratedOne) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 1));
  std::string pod = podJson(gpuResources(2));
  pod.replace(pod.find(R"("generateName":"virt-launcher-train-")"), 37, R"("name":"trainer")");
  auto r = gpuPod(pod);
  EXPECT_TRUE(refusedWith(r, "BudgetExceeded")) << r.message;
}

TEST_F(PodWebhooks, RawGpuPodWithinItsBudgetIsAdmitted) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 2));
  EXPECT_TRUE(gpuPod(podJson(gpuResources(2))).allowed);
}

TEST_F(PodWebhooks, RawGpuPodInAClosedPoolIsRefused) {
  auto cls = passthroughClass();
  cls.gateOpen = false;
  cls.gateFailureId = "audit-7";
  put(cls);
  auto r = gpuPod(podJson(gpuResources(1)));
  EXPECT_TRUE(refusedWith(r, "GateClosed")) << r.message;
  EXPECT_NE(r.message.find("audit-7"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, DryRunOfARawGpuPodGetsTheSameAnswer) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 1));
  EXPECT_EQ(gpuPod(podJson(gpuResources(2)), true).message, gpuPod(podJson(gpuResources(2))).message);
}

// Owner references are proven, never trusted: a launcher is charged beyond
// its VMI's devices only; an owner of another group is no owner.
TEST_F(PodWebhooks, LauncherOfAVmiWhoseDevicesCoverItIsAdmittedAtItsBudget) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 2));
  trainVmi();
  auto r = gpuPod(podJson(gpuResources(2), vmiOwner("vmi-1")));
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST_F(PodWebhooks, PodNamingAVmiOfAnotherGroupIsChargedAsARawPod) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 1));
  trainVmi();
  const std::string forged = R"({"apiVersion":"x.io/v1","kind":"VirtualMachineInstance","name":"train",)"
                             R"("uid":"vmi-1","controller":true})";
  auto r = gpuPod(podJson(gpuResources(2), forged));
  EXPECT_TRUE(refusedWith(r, "BudgetExceeded")) << r.message;
}

TEST_F(PodWebhooks, PodNamingAVmiThatDoesNotExistIsRefused) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 4));
  auto r = gpuPod(podJson(gpuResources(1), vmiOwner("vmi-404")));
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
  EXPECT_NE(r.message.find("cannot be proven"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, LauncherWebhookDoesNotPinAPodNamingAVmiOfAnotherGroup) {
  trainVmi();
  const std::string forged = R"({"apiVersion":"x.io/v1","kind":"VirtualMachineInstance","name":"train",)"
                             R"("uid":"vmi-1","controller":true})";
  auto r = launcher(podJson(gpuResources(2), forged));
  EXPECT_TRUE(r.allowed);
  EXPECT_TRUE(r.patch.empty()) << r.patch.toJson();
}

// --- The placement door ------------------------------------------------------

TEST_F(PodWebhooks, GpuPodNamingTheDefaultSchedulerIsRefusedAfterMutation) {
  put(hrq("acme", "plan-quota", model::quotaKey(kH200), 4));
  auto r = gpuPod(podJson(gpuResources(1), "", "", R"("schedulerName":"default-scheduler",)"));
  EXPECT_TRUE(refusedWith(r, "SchedulerBypass")) << r.message;
  EXPECT_NE(r.message.find("tally-scheduler"), std::string::npos) << r.message;
}

TEST_F(PodWebhooks, PlacementDoorPointsAGpuPodAtTallysScheduler) {
  auto r = route(podJson(gpuResources(1), "", "", R"("schedulerName":"default-scheduler",)"));
  ASSERT_TRUE(r.allowed) << r.message;
  const auto& op = onlyOp(r);
  EXPECT_EQ(op.path, "/spec/schedulerName");
  EXPECT_EQ(op.valueJson, R"("tally-scheduler")");
}

TEST_F(PodWebhooks, PlacementDoorLeavesAPodOnTallysSchedulerAndACpuPodAlone) {
  auto r = route(podJson(gpuResources(1)));
  EXPECT_TRUE(r.allowed);
  EXPECT_TRUE(r.patch.empty()) << r.patch.toJson();
  auto cpu = route(podJson(R"({"requests":{"cpu":"1"}})", "", "", R"("schedulerName":"default-scheduler",)"));
  EXPECT_TRUE(cpu.allowed);
  EXPECT_TRUE(cpu.patch.empty()) << cpu.patch.toJson();
}

// A pod naming a claim made from a template, as the API server sends it.
std::string claimPodJson(const std::string& resources, std::string_view spec = kOnTallysScheduler) {
  std::string pod = podJson(resources, "", "", spec);
  const std::string at = R"("containers":)";
  pod.insert(pod.find(at), R"("resourceClaims":[{"name":"gpu","resourceClaimTemplateName":"one-h200"}],)");
  return pod;
}

TEST_F(PodWebhooks, PlacementDoorMarksAClaimPodSoTheExtenderIsAsked) {
  put(model::testing::draClass());
  // No resources at all: resources, requests and limits are created.
  auto bare = route(claimPodJson("{}", R"("schedulerName":"default-scheduler",)"));
  ASSERT_TRUE(bare.allowed) << bare.message;
  const std::string patch = bare.patch.toJson();
  EXPECT_NE(patch.find(R"("path":"/spec/schedulerName")"), std::string::npos) << patch;
  EXPECT_NE(patch.find(R"("path":"/spec/containers/0/resources/requests","value":{"gpu.tally.dev/claims":"1"})"),
            std::string::npos)
      << patch;
  EXPECT_NE(patch.find(R"("path":"/spec/containers/0/resources/limits","value":{"gpu.tally.dev/claims":"1"})"),
            std::string::npos)
      << patch;
  // Requests present, limits absent: the marker joins the requests (its '/' escaped).
  auto cpu = route(claimPodJson(R"({"requests":{"cpu":"1"}})"));
  ASSERT_TRUE(cpu.allowed) << cpu.message;
  const std::string cpuPatch = cpu.patch.toJson();
  EXPECT_NE(cpuPatch.find(R"("path":"/spec/containers/0/resources/requests/gpu.tally.dev~1claims","value":"1")"),
            std::string::npos)
      << cpuPatch;
  EXPECT_NE(cpuPatch.find(R"("path":"/spec/containers/0/resources/limits","value":{"gpu.tally.dev/claims":"1"})"),
            std::string::npos)
      << cpuPatch;
  EXPECT_EQ(cpuPatch.find("schedulerName"), std::string::npos) << "already on Tally's scheduler";
  // Marked already: nothing to do.
  auto marked =
      route(claimPodJson(R"({"requests":{"gpu.tally.dev/claims":"1"},"limits":{"gpu.tally.dev/claims":"1"}})"));
  EXPECT_TRUE(marked.allowed);
  EXPECT_TRUE(marked.patch.empty()) << marked.patch.toJson();
}

TEST_F(PodWebhooks, ClaimPodsAreNoneOfTallysWithoutADraPoolAndRefusedUnmarkedWithOne) {
  auto none = route(claimPodJson("{}", R"("schedulerName":"default-scheduler",)"));
  EXPECT_TRUE(none.allowed);
  EXPECT_TRUE(none.patch.empty()) << "no GPUDeviceClass is a DRA pool: " << none.patch.toJson();
  EXPECT_TRUE(gpuPod(claimPodJson("{}")).allowed);
  put(model::testing::draClass());
  auto unmarked = gpuPod(claimPodJson("{}"));
  EXPECT_TRUE(refusedWith(unmarked, "SchedulerBypass")) << unmarked.message;
  EXPECT_NE(unmarked.message.find("gpu.tally.dev/claims"), std::string::npos) << unmarked.message;
  auto marked = gpuPod(claimPodJson(R"({"requests":{"gpu.tally.dev/claims":"1"}})"));
  EXPECT_TRUE(marked.allowed) << marked.message;
}

TEST_F(PodWebhooks, PlacementDoorRefusesAPresetFullNodeNamingItsFreeUnits) {
  put(model::testing::gpuPod("acme-ml", "busy", kH200, 2, "gpu-2", model::PodPhase::Running));
  auto r = route(podJson(gpuResources(1), "", "", R"("nodeName":"gpu-2",)"));
  EXPECT_TRUE(refusedWith(r, "NodeInsufficient")) << r.message;
  EXPECT_NE(r.message.find("names node gpu-2"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("0 of 2"), std::string::npos) << r.message;
  // A preset node that reached the validating door (a later mutator's) is refused there too.
  auto v = gpuPod(podJson(gpuResources(1), "", "", R"("nodeName":"gpu-2",)"));
  EXPECT_TRUE(refusedWith(v, "NodeInsufficient")) << v.message;
}

TEST_F(PodWebhooks, PlacementDoorMovesAPresetNodeWithRoomIntoAnAffinity) {
  auto r = route(podJson(gpuResources(1), "", "", R"("nodeName":"gpu-2","schedulerName":"default-scheduler",)"));
  ASSERT_TRUE(r.allowed) << r.message;
  const auto& ops = r.patch.operations();
  ASSERT_EQ(ops.size(), 3u) << r.patch.toJson();
  EXPECT_EQ(ops[0].op, JsonPatch::Op::kRemove);
  EXPECT_EQ(ops[0].path, "/spec/nodeName");
  EXPECT_EQ(ops[1].path, "/spec/affinity");
  EXPECT_NE(ops[1].valueJson.find(kPin), std::string::npos) << ops[1].valueJson;
  EXPECT_EQ(ops[2].path, "/spec/schedulerName");
}

TEST_F(PodWebhooks, EveryVendorAClassSellsIsDecided) {
  put(passthroughClass("gaudi2", "habana.ai/gaudi2"));
  put(gpuNode("hl-1", model::NodeMode::VmPassthrough, "habana.ai/gaudi2", 8));
  put(hrq("acme", "plan-quota", model::quotaKey("habana.ai/gaudi2"), 1));
  auto r = gpuPod(podJson(gpuResources(2, "habana.ai/gaudi2")));
  EXPECT_TRUE(refusedWith(r, "BudgetExceeded")) << r.message;
  auto routed = route(podJson(gpuResources(1, "habana.ai/gaudi2"), "", "", R"("schedulerName":"default-scheduler",)"));
  EXPECT_FALSE(routed.patch.empty()) << "another vendor's GPU pod is pointed at Tally's scheduler too";
  // A resource no class sells is no GPU: left alone.
  auto other = route(podJson(gpuResources(1, "example.com/fpga"), "", "", R"("schedulerName":"default-scheduler",)"));
  EXPECT_TRUE(other.allowed);
  EXPECT_TRUE(other.patch.empty());
}

TEST_F(PodWebhooks, CpuPodIsAdmittedEvenWhileStarting) {
  watched = {model::Kind::DeviceClass};
  build();
  EXPECT_TRUE(gpuPod(podJson(R"({"requests":{"cpu":"1","memory":"1Gi"}})")).allowed);
}

TEST_F(PodWebhooks, RawGpuPodWhileTheSnapshotIsNotSyncedIsRefusedClosed) {
  watched = {model::Kind::DeviceClass};
  build();
  auto r = gpuPod(podJson(gpuResources(1)));
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
}

TEST_F(PodWebhooks, HandlersReadTheNewestSnapshot) {
  auto handler = launcherPodWebhook(writer->snapshots(), options);
  writer->flush();
  auto req = request(reviewJson(podJson(gpuResources(2), vmiOwner("vmi-1"))));
  EXPECT_FALSE(handler.decide(req).allowed());
  trainVmi();
  writer->flush();
  EXPECT_FALSE(handler.decide(req).response.patch.empty());
}

}  // namespace
}  // namespace tally::controller
