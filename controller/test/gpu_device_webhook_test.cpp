// The GPUDevice webhook on hand-built snapshots (a state::Writer fed model
// objects and flushed), each review decoded from its AdmissionReview text as
// the API server sends it.

#include "tally/controller/gpu_device_webhook.hpp"

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/index.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace model::testing;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;

constexpr const char* kTenant = "system:serviceaccount:acme-ml:default";

std::string deviceJson(const std::string& name, const std::string& cls, std::int64_t count,
                       const std::string& status = "") {
  std::string s = R"({"apiVersion":"gpu.tally.dev/v1alpha1","kind":"GPUDevice","metadata":{"name":")" + name +
                  R"(","namespace":"acme-ml"},"spec":{"class":")" + cls + R"(","count":)" + std::to_string(count) + "}";
  if (!status.empty()) s += R"(,"status":)" + status;
  return s + "}";
}

std::string reviewJson(const std::string& operation, const std::string& user, const std::string& object,
                       const std::string& oldObject, const std::string& subResource = "", bool dryRun = false) {
  std::string s = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
                  R"("kind":{"group":"gpu.tally.dev","version":"v1alpha1","kind":"GPUDevice"},)"
                  R"("resource":{"group":"gpu.tally.dev","version":"v1alpha1","resource":"gpudevices"},)"
                  R"("name":"d","namespace":"acme-ml","operation":")" +
                  operation + R"(","userInfo":{"username":")" + user + R"("},"dryRun":)" + (dryRun ? "true" : "false");
  if (!subResource.empty()) s += R"(,"subResource":")" + subResource + "\"";
  s += R"(,"object":)" + (object.empty() ? std::string("null") : object);
  s += R"(,"oldObject":)" + (oldObject.empty() ? std::string("null") : oldObject);
  return s + "}}";
}

struct GpuDeviceWebhook : ::testing::Test {
  std::set<model::Kind> watched;
  std::unique_ptr<state::Writer> writer;
  GpuDeviceWebhookOptions options;
  std::string key = model::quotaKey(kH200);

  void SetUp() override {
    build();
    put(passthroughClass());
    put(gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
    put(gpuNode("gpu-2", model::NodeMode::VmPassthrough, kH200, 2));
    put(ns("acme"));
    put(ns("acme-ml", {"acme"}));
    put(ns("beta"));
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

  AdmissionResponse answer(const std::string& review) {
    writer->flush();
    auto request = runtime::admission::decodeAdmissionReview(review);
    EXPECT_TRUE(request) << (request ? "" : request.error().message);
    if (!request) return AdmissionResponse::refuse(400, "bad test review");
    auto snapshot = writer->snapshots().read();
    return reviewGpuDevice(*snapshot, *request, options).response;
  }
  AdmissionResponse create(std::int64_t count, const std::string& cls = "h200") {
    return answer(reviewJson("CREATE", kTenant, deviceJson("d", cls, count), ""));
  }
  static bool refusedWith(const AdmissionResponse& r, std::string_view code) {
    return !r.allowed && r.message.find("[" + std::string(code) + "]") != std::string::npos;
  }
};

TEST_F(GpuDeviceWebhook, OrderThatFitsIsAdmitted) { EXPECT_TRUE(create(3).allowed); }

TEST_F(GpuDeviceWebhook, UnknownClassIsRefusedNamingObjectAndClass) {
  auto r = create(1, "b200");
  EXPECT_TRUE(refusedWith(r, "ClassUnknown")) << r.message;
  EXPECT_EQ(r.message.rfind(kRefusalPrefix, 0), 0u) << r.message;
  EXPECT_NE(r.message.find("gpudevice/acme-ml/d"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("b200"), std::string::npos) << r.message;
  EXPECT_EQ(r.code, 403);
}

TEST_F(GpuDeviceWebhook, DeletingClassIsRefused) {
  auto cls = passthroughClass();
  cls.deleting = true;
  put(cls);
  EXPECT_TRUE(refusedWith(create(1), "ClassDeleting"));
}

TEST_F(GpuDeviceWebhook, CountAboveMaxCountIsRefusedNamingQuantityAndLimit) {
  auto cls = passthroughClass();
  cls.maxCount = 2;
  put(cls);
  auto r = create(3);
  EXPECT_TRUE(refusedWith(r, "CountAboveMax")) << r.message;
  EXPECT_NE(r.message.find("asks for 3"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("at most 2"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, PoolWithoutEnoughFreeUnitsIsRefused) {
  put(device("beta", "held", "h200", 4, model::DevicePhase::Bound, "gpu-1"));
  auto r = create(3);
  EXPECT_TRUE(refusedWith(r, "PoolInsufficient")) << r.message;
  EXPECT_NE(r.message.find("2 free unit(s)"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, OrderNoSingleNodeCanHoldIsRefused) {
  put(device("beta", "held", "h200", 1, model::DevicePhase::Bound, "gpu-1"));
  auto r = create(4);
  EXPECT_TRUE(refusedWith(r, "NoSingleNode")) << r.message;
}

TEST_F(GpuDeviceWebhook, AncestorBudgetIsRefused) {
  put(hrq("acme", "plan-quota", key, 2));
  put(device("acme", "held", "h200", 1, model::DevicePhase::Bound, "gpu-2"));
  auto r = create(2);
  EXPECT_TRUE(refusedWith(r, "BudgetExceeded")) << r.message;
  EXPECT_TRUE(create(1).allowed);
}

TEST_F(GpuDeviceWebhook, LicensedClassWithoutEntitlementIsRefused) {
  auto cls = passthroughClass();
  cls.requiresEntitlement = true;
  put(cls);
  auto r = create(1);
  EXPECT_TRUE(refusedWith(r, "NotEntitled")) << r.message;
  auto entitled = ns("acme");
  entitled.entitledClasses.push_back("h200");
  put(entitled);
  EXPECT_TRUE(create(1).allowed);
}

TEST_F(GpuDeviceWebhook, ClosedGateIsRefused) {
  auto cls = passthroughClass();
  cls.gateOpen = false;
  cls.gateFailureId = "h200-1";
  put(cls);
  EXPECT_TRUE(refusedWith(create(1), "GateClosed"));
}

TEST_F(GpuDeviceWebhook, SnapshotNotSyncedRefusesClosedNamingTheCaches) {
  watched = {model::Kind::GpuDevice, model::Kind::Node};
  build();
  put(passthroughClass());
  auto r = create(1);
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
  EXPECT_NE(r.message.find("GPUDevice"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("Node"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, DryRunGetsTheSameAnswer) {
  auto cls = passthroughClass();
  cls.maxCount = 2;
  put(cls);
  auto dry = answer(reviewJson("CREATE", kTenant, deviceJson("d", "h200", 3), "", "", true));
  auto wet = create(3);
  EXPECT_EQ(dry.allowed, wet.allowed);
  EXPECT_EQ(dry.message, wet.message);
}

TEST_F(GpuDeviceWebhook, SpecChangeIsRefusedForEveryone) {
  options.controllerIdentity = kTenant;  // even Tally may not change an order
  auto r = answer(reviewJson("UPDATE", kTenant, deviceJson("d", "h200", 2), deviceJson("d", "h200", 1)));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 422);
  EXPECT_NE(r.message.find("spec is immutable"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, MetadataChangeIsAdmitted) {
  std::string labelled = deviceJson("d", "h200", 1);
  labelled.replace(labelled.find(R"("namespace")"), 0, R"("labels":{"team":"ml"},)");
  EXPECT_TRUE(answer(reviewJson("UPDATE", kTenant, labelled, deviceJson("d", "h200", 1))).allowed);
}

TEST_F(GpuDeviceWebhook, StatusWriteByATenantIsRefusedOnTheSubresource) {
  const std::string bound = R"({"phase":"Bound","node":"gpu-1"})";
  auto r =
      answer(reviewJson("UPDATE", kTenant, deviceJson("d", "h200", 1, bound), deviceJson("d", "h200", 1), "status"));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find(kTenant), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(kDefaultControllerIdentity), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, StatusChangeByATenantIsRefusedOnTheMainResource) {
  const std::string hidden = R"({"phase":"Released"})";
  auto r = answer(reviewJson("UPDATE", kTenant, deviceJson("d", "h200", 1, hidden),
                             deviceJson("d", "h200", 1, R"({"phase":"Bound","node":"gpu-1"})")));
  EXPECT_FALSE(r.allowed) << "a tenant could hide a hold by writing Released";
}

TEST_F(GpuDeviceWebhook, StatusWriteByTallyIsAdmitted) {
  const std::string bound = R"({"phase":"Bound","node":"gpu-1"})";
  auto r = answer(reviewJson("UPDATE", std::string(kDefaultControllerIdentity), deviceJson("d", "h200", 1, bound),
                             deviceJson("d", "h200", 1), "status"));
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST_F(GpuDeviceWebhook, OnlyTallyRemovesTheReleaseFinalizer) {
  std::string held = deviceJson("d", "h200", 1, R"({"phase":"Bound","node":"gpu-1"})");
  held.replace(held.find(R"("namespace")"), 0, R"("finalizers":["gpu.tally.dev/release"],)");
  const std::string bare = deviceJson("d", "h200", 1, R"({"phase":"Bound","node":"gpu-1"})");
  auto r = answer(reviewJson("UPDATE", kTenant, bare, held));
  EXPECT_FALSE(r.allowed) << "a tenant could free units without the release being recorded";
  EXPECT_EQ(r.code, 403);
  EXPECT_NE(r.message.find("gpu.tally.dev/release"), std::string::npos) << r.message;
  EXPECT_TRUE(answer(reviewJson("UPDATE", std::string(kDefaultControllerIdentity), bare, held)).allowed);
  EXPECT_TRUE(answer(reviewJson("UPDATE", kTenant, held, bare)).allowed) << "adding it is harmless";
}

TEST_F(GpuDeviceWebhook, DeletingADeviceARunningVmiHoldsIsRefusedNamingTheVmi) {
  model::VirtualMachineInstance vmi;
  vmi.ns = "acme-ml";
  vmi.name = "train";
  vmi.uid = "vmi-uid";
  vmi.phase = "Running";
  put(vmi);
  const std::string attached =
      R"({"phase":"Attached","node":"gpu-1","attachedTo":{"namespace":"acme-ml","name":"train","uid":"vmi-uid"}})";
  auto r = answer(reviewJson("DELETE", kTenant, "", deviceJson("d", "h200", 1, attached)));
  EXPECT_TRUE(refusedWith(r, "DeviceAttached")) << r.message;
  EXPECT_NE(r.message.find("vmi/acme-ml/train"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, DeletingAnUnattachedDeviceIsAdmitted) {
  auto r = answer(reviewJson("DELETE", kTenant, "", deviceJson("d", "h200", 1, R"({"phase":"Bound","node":"gpu-1"})")));
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST_F(GpuDeviceWebhook, UnreadableObjectIsRefusedWithTheDecoderMessage) {
  auto r = answer(reviewJson("CREATE", kTenant, R"({"metadata":{"name":"d"},"spec":{"count":1}})", ""));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("spec.class"), std::string::npos) << r.message;
}

TEST_F(GpuDeviceWebhook, RefusalsAreCountedByOperationAndEveryCode) {
  observability::Registry registry;
  runtime::admission::WebhookOptions frame;
  frame.metrics = std::make_shared<runtime::admission::WebhookMetrics>(registry);
  auto licensed = passthroughClass();
  licensed.requiresEntitlement = true;
  licensed.maxCount = 2;
  put(licensed);
  writer->flush();
  const std::string name(kGpuDeviceWebhookName);
  const auto webhook = gpuDeviceWebhook(writer->snapshots(), options);
  // NotEntitled and CountAboveMax at once, then a changed spec.
  runtime::admission::answerReview(name, webhook, reviewJson("CREATE", kTenant, deviceJson("d", "h200", 3), ""), frame);
  runtime::admission::answerReview(
      name, webhook, reviewJson("UPDATE", kTenant, deviceJson("d", "h200", 2), deviceJson("d", "h200", 1)), frame);
  const std::string text = registry.render();
  for (const char* series :
       {R"(tally_webhook_refusals_total{code="NotEntitled",operation="CREATE",webhook="gpudevices"} 1)",
        R"(tally_webhook_refusals_total{code="CountAboveMax",operation="CREATE",webhook="gpudevices"} 1)",
        R"(tally_webhook_refusals_total{code="SpecImmutable",operation="UPDATE",webhook="gpudevices"} 1)"}) {
    EXPECT_NE(text.find(series), std::string::npos) << series << "\n" << text;
  }
}

TEST_F(GpuDeviceWebhook, HandlerReadsTheNewestSnapshot) {
  auto handler = gpuDeviceWebhook(writer->snapshots(), options);
  writer->flush();
  auto request =
      runtime::admission::decodeAdmissionReview(reviewJson("CREATE", kTenant, deviceJson("d", "h200", 3), ""));
  ASSERT_TRUE(request);
  EXPECT_TRUE(handler.decide(*request).allowed());
  put(device("beta", "held", "h200", 4, model::DevicePhase::Bound, "gpu-1"));
  writer->flush();
  EXPECT_TRUE(refusedWith(handler.decide(*request).response, "PoolInsufficient"));
}

}  // namespace
}  // namespace tally::controller
