// No way around the doors, against a real kube-apiserver calling the real
// tally-controller over HTTPS through the webhook configurations shipped in
// manifests/webhook/ (their match conditions included; only clientConfig is
// re-pointed at the replica): a pod with a preset node name on a node whose
// units GPUDevices hold is refused naming the node's free units; one on a node
// with room is handed to Tally's scheduler profile with a required affinity;
// a pod naming another scheduler is pointed at Tally's; an owner reference of
// another group, or to a VMI that does not exist, hides no GPU from the
// budget; a class of another vendor (habana.ai) is decided like NVIDIA's.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kValidating = "tally-gpu-pod-validating";
constexpr const char* kMutating = "tally-pod-placement-mutating";
constexpr const char* kGaudi = "habana.ai/gaudi2";
Replica* replica = nullptr;

std::string pod(const std::string& name, const std::string& resource, int count, const std::string& spec = "",
                const std::string& owner = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: acme\n" +
         (owner.empty() ? "" : "  ownerReferences:\n  - " + owner + "\n") + "spec:\n" + spec +
         "  tolerations: [{operator: Exists}]\n  containers:\n  - name: c\n    image: trainer\n" +
         "    resources:\n      requests: {" + resource + ": " + std::to_string(count) + "}\n      limits: {" +
         resource + ": " + std::to_string(count) + "}\n";
}

std::string jsonpath(const std::string& name, const std::string& path) {
  return kubectl("get pod -n acme " + name + " -o jsonpath=" + path);
}

class PlacementEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "place-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    kubectl("create namespace tally-system", &rc);
    kubectl("create namespace acme", &rc);
    ASSERT_EQ(rc, 0);
    kubectl("label namespace acme acme.tree.hnc.x-k8s.io/depth=0", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(gpuNodes("gpu-h-", 2, 4));
    ASSERT_TRUE(gpuNodes("hl-", 1, 8, kGaudi));
    applyYaml(gpuClass("h200", kH200, 8), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("gaudi2", kGaudi, 8), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
                  "metadata: {name: plan-quota, namespace: acme}\nspec: {hard: {requests." + kH200 +
                  ": \"8\", requests." + kGaudi + ": \"1\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    replica = new Replica(startReplica(
        "place-a", kValidating,
        {std::string("--mutating-webhook-configurations=") + kMutating, "--gpu-schedulers=tally-scheduler"}));
    ASSERT_GT(replica->pid, 0);
    applyYaml(shippedWebhooks("", replica->webhookPort, {{"pod-placement"}}), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(shippedWebhooks("", replica->webhookPort, {{"gpu-pods"}}), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "the replica never became ready; log: "
        << replica->log;
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    // Four H200 of gpu-h-0 held by a Bound GPUDevice (a stopped VM's), placed by the binder.
    applyYaml(device("acme", "held", "h200", 4), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}/{.status.node}").rfind("Bound/", 0) == 0;
    })) << kubectl("get gpudevice -n acme held -o yaml");
    // The API server calls both doors with the injected CA (a first pod may race the injection).
    ASSERT_TRUE(eventually(
        [] {
          int code = 0;
          std::string out = applyYaml(pod("warmup", kH200, 1), &code);
          kubectl("delete pod -n acme warmup --grace-period=0 --force --ignore-not-found", &code);
          return out.find("created") != std::string::npos;
        },
        60s))
        << "the API server never admitted through the doors; log: " << replica->log;
  }

  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new PlacementEnvironment);

std::string heldNode() { return kubectl("get gpudevice -n acme held -o jsonpath={.status.node}"); }
std::string otherNode() { return heldNode() == "gpu-h-0" ? "gpu-h-1" : "gpu-h-0"; }

TEST(Placement, PresetNodeOnAFullNodeIsRefusedNamingItsFreeUnits) {
  int rc = 0;
  const std::string out = applyYaml(pod("preset-full", kH200, 1, "  nodeName: " + heldNode() + "\n"), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[NodeInsufficient]"), std::string::npos) << out;
  EXPECT_NE(out.find("names node " + heldNode()), std::string::npos) << out;
  EXPECT_NE(out.find("0 of 4 " + std::string(kH200) + " free (4 held by GPUDevices)"), std::string::npos) << out;
  EXPECT_EQ(kubectl("get pod -n acme preset-full -o name --ignore-not-found"), "");
}

TEST(Placement, PresetNodeWithRoomIsHandedToTallysSchedulerPinnedToThatNode) {
  int rc = 0;
  const std::string node = otherNode();
  const std::string out = applyYaml(pod("preset-room", kH200, 2, "  nodeName: " + node + "\n"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(jsonpath("preset-room", "{.spec.nodeName}"), "") << "the kubelet would have taken it unchecked";
  EXPECT_EQ(jsonpath("preset-room", "{.spec.schedulerName}"), "tally-scheduler");
  EXPECT_EQ(jsonpath("preset-room",
                     "{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                     ".nodeSelectorTerms[0].matchFields[0].values[0]}"),
            node);
  kubectl("delete pod -n acme preset-room --grace-period=0 --force", &rc);
}

TEST(Placement, PodNamingAnotherSchedulerIsPointedAtTallys) {
  int rc = 0;
  const std::string out = applyYaml(pod("other-scheduler", kH200, 1, "  schedulerName: my-scheduler\n"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(jsonpath("other-scheduler", "{.spec.schedulerName}"), "tally-scheduler");
  kubectl("delete pod -n acme other-scheduler --grace-period=0 --force", &rc);
}

TEST(Placement, OwnerReferenceOfAnotherGroupHidesNoGpuFromTheBudget) {
  int rc = 0;
  const std::string forged =
      "{apiVersion: x.io/v1, kind: VirtualMachineInstance, name: vm, uid: "
      "00000000-0000-0000-0000-000000000001, controller: true}";
  const std::string out = applyYaml(pod("forged-owner", kH200, 9, "", forged), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[BudgetExceeded]"), std::string::npos) << out;
  EXPECT_NE(out.find("plan-quota"), std::string::npos) << out;
}

TEST(Placement, OwnerReferenceToAVmiThatDoesNotExistIsRefused) {
  int rc = 0;
  const std::string ghost =
      "{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance, name: ghost, uid: "
      "00000000-0000-0000-0000-0000000000ff, controller: true}";
  const std::string out = applyYaml(pod("ghost-owner", kH200, 1, "", ghost), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("cannot be proven"), std::string::npos) << out;
}

TEST(Placement, AnotherVendorsClassIsDecidedLikeNvidias) {
  int rc = 0;
  std::string out = applyYaml(pod("gaudi-over", kGaudi, 2), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[BudgetExceeded]"), std::string::npos) << out;
  out = applyYaml(pod("gaudi-fits", kGaudi, 1), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(jsonpath("gaudi-fits", "{.spec.schedulerName}"), "tally-scheduler");
  kubectl("delete pod -n acme gaudi-fits --grace-period=0 --force", &rc);
}

TEST(Placement, AnExtendedResourceNoClassSellsIsLeftAlone) {
  int rc = 0;
  const std::string out = applyYaml(pod("fpga", "example.com/fpga", 1), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(jsonpath("fpga", "{.spec.schedulerName}"), "default-scheduler");
  kubectl("delete pod -n acme fpga --grace-period=0 --force", &rc);
}

}  // namespace
}  // namespace tally::runtime::e2e
