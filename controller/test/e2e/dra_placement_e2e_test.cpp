// Pods that only name ResourceClaims are placed by Tally too (issue 29, item
// 4), on the real kube-apiserver calling the shipped pod and claim webhooks,
// kube-controller-manager making the claims of a pod's templates, and
// kube-scheduler (its DynamicResources plugin allocating them) calling the
// real tally-extender. The test plays only the DRA driver (ResourceSlices).
//  (a) the placement door marks a pod that names claims with
//      gpu.tally.dev/claims, so kube-scheduler asks tally-extender about it:
//      its filter decides, its bind posts the Binding, and the claim is
//      allocated and charged;
//  (b) a pool whose gate closes after a pod's claim was admitted keeps that
//      pod from every node, naming the gate, until it opens again;
//  (c) a claim pod naming another scheduler is pointed at Tally's, marked.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <thread>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kValidating = "tally-dra-placement-validating";
constexpr const char* kMutating = "tally-pod-placement-mutating";
constexpr const char* kDriver = "gpu.example.com";
constexpr const char* kMarker = "gpu.tally.dev/claims";
constexpr const char* kKey = "requests.deviceclass.resource.kubernetes.io/h200.example.com";

Replica* replica = nullptr;
pid_t extenderPid = -1;
Replica extender;  // only its port: tally-extender serves /metrics beside its verbs

std::string slice(const std::string& node, int devices) {
  std::string out = std::string("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: ") + node +
                    "-gpus}\nspec:\n  driver: " + kDriver + "\n  nodeName: " + node + "\n  pool: {name: " + node +
                    ", generation: 1, resourceSliceCount: 1}\n  devices:\n";
  for (int i = 0; i < devices; ++i) {
    out += "  - name: gpu-" + std::to_string(i) + "\n    attributes:\n      productName: {string: H200}\n";
  }
  return out;
}

std::string claimTemplate(const std::string& name, int count) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: " + name +
         ", namespace: acme}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: "
         "{deviceClassName: h200.example.com, allocationMode: ExactCount, count: " +
         std::to_string(count) + "}\n";
}

// A pod naming one claim: `source` is "resourceClaimTemplateName: t" or
// "resourceClaimName: c"; `extra` more spec lines.
std::string claimPod(const std::string& name, const std::string& source, const std::string& extra = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: acme}\nspec:\n" + extra +
         "  resourceClaims:\n  - {name: gpu, " + source +
         "}\n  containers:\n  - name: main\n    image: x\n    resources:\n      claims:\n      - {name: gpu}\n";
}

std::string jsonpath(const std::string& what, const std::string& path) {
  return kubectl("get " + what + " -n acme -o 'jsonpath=" + path + "'");
}

std::string markerOf(const std::string& pod, const std::string& field) {
  return jsonpath("pod " + pod, "{.spec.containers[0].resources." + field + ".gpu\\.tally\\.dev/claims}");
}

std::string eventsOf(const std::string& pod) {
  return kubectl("get events -n acme --field-selector involvedObject.name=" + pod +
                 " -o 'jsonpath={.items[*].message}'");
}

class DraPlacementEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "drap-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name, /*controllerManager=*/true)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    kubectl("label namespace acme acme.tree.hnc.x-k8s.io/depth=0", &rc);
    ASSERT_EQ(rc, 0);
    const std::string nodes =
        runCommand(cluster().bin() +
                       "/tally-fixtures nodes --count 2 --prefix dra- --resource none --ready=false --wait-ready "
                       "--timeout 120s --kubeconfig " +
                       cluster().kubeconfig() + " 2>&1",
                   &rc);
    ASSERT_EQ(rc, 0) << nodes;
    for (const std::string& yaml :
         {std::string("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: h200.example.com}\n") +
              "spec:\n  selectors:\n  - cel: {expression: 'device.driver == \"" + kDriver +
              "\" && device.attributes[\"" + kDriver + "\"].productName == \"H200\"'}\n",
          std::string("apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata: {name: h200-dra}\n") +
              "spec:\n  workload: pod\n  allocation: passthrough\n  maxCount: 8\n  dra:\n    driver: " + kDriver +
              "\n    deviceClassName: h200.example.com\n    attributes: {productName: H200}\n",
          slice("dra-0", 4), slice("dra-1", 2),
          std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
              "metadata: {name: plan-quota, namespace: acme}\nspec: {hard: {" + kKey + ": \"6\"}}\n"}) {
      const std::string applied = applyYaml(yaml, &rc);
      ASSERT_EQ(rc, 0) << applied;
    }
    std::uint16_t port = 0;
    ASSERT_TRUE(startExtenderAndScheduler(name, "drap-e2e", extenderPid, &port));
    extender.opsPort = port;
    // The doors evaluate the gate themselves (no auditor publishes it here);
    // the test cluster's kube-scheduler calls tally-extender from its default
    // profile.
    replica = new Replica(startReplica("drap-a", kValidating,
                                       {"--enable-pool-auditor=false", "--gpu-schedulers=default-scheduler",
                                        std::string("--mutating-webhook-configurations=") + kMutating}));
    ASSERT_GT(replica->pid, 0);
    applyYaml(shippedWebhooks(kValidating, replica->webhookPort, {{"resourceclaims"}, {"gpu-pods"}}), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(shippedWebhooks("", replica->webhookPort, {{"pod-placement"}}), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "tally-controller never became ready; log: "
        << replica->log;
    // The API server calls the placement door with the injected CA (a first
    // pod may race the injection): the door marks a claim pod.
    ASSERT_TRUE(eventually(
        [] {
          int code = 0;
          applyYaml(claimPod("warmup", "resourceClaimName: nothing-yet"), &code);
          const bool marked = code == 0 && markerOf("warmup", "requests") == "1";
          kubectl("delete pod -n acme warmup --grace-period=0 --force --ignore-not-found", &code);
          return marked;
        },
        60s))
        << "the API server never admitted a claim pod through the placement door; log: " << replica->log;
  }
  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    if (extenderPid > 0) {
      ::kill(extenderPid, SIGTERM);
      ::waitpid(extenderPid, nullptr, 0);
    }
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new DraPlacementEnvironment);

TEST(DraPlacement, AClaimPodIsMarkedFilteredAndBoundByTheExtender) {
  int rc = 0;
  applyYaml(claimTemplate("three-h200", 3), &rc);
  ASSERT_EQ(rc, 0);
  const double filtersBefore = metricOf(extender, "tally_extender_requests_total", "route=\"filter\"");
  const double bindsBefore = metricOf(extender, "tally_extender_binds_total", "result=\"bound\"");
  const std::string out = applyYaml(claimPod("train", "resourceClaimTemplateName: three-h200"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(markerOf("train", "requests"), "1");
  EXPECT_EQ(markerOf("train", "limits"), "1") << "an extended resource needs its limit";
  // Three devices fit only on dra-0 (dra-1 has two): the claim is made, the
  // extender filters and binds, the allocator allocates there.
  ASSERT_TRUE(eventually([] { return jsonpath("pod train", "{.spec.nodeName}") == "dra-0"; }, 90s))
      << kubectl("describe pod -n acme train");
  const std::string claim = jsonpath("pod train", "{.status.resourceClaimStatuses[0].resourceClaimName}");
  ASSERT_FALSE(claim.empty());
  EXPECT_EQ(jsonpath("resourceclaim " + claim, "{.status.allocation.devices.results[*].pool}"), "dra-0 dra-0 dra-0");
  EXPECT_GT(metricOf(extender, "tally_extender_requests_total", "route=\"filter\""), filtersBefore)
      << "kube-scheduler never asked tally-extender about the claim pod";
  EXPECT_EQ(metricOf(extender, "tally_extender_binds_total", "result=\"bound\""), bindsBefore + 1)
      << "the Binding was not posted by tally-extender";
}

TEST(DraPlacement, AGateClosedAfterTheClaimWasAdmittedKeepsItsPodFromEveryNode) {
  int rc = 0;
  applyYaml(claimTemplate("one-h200", 1), &rc);
  ASSERT_EQ(rc, 0);
  // Held back by a scheduling gate: kube-controller-manager still makes its
  // claim, which the claim door admits while the pool is open.
  const std::string out = applyYaml(
      claimPod("late", "resourceClaimTemplateName: one-h200", "  schedulingGates:\n  - {name: example.com/hold}\n"),
      &rc);
  ASSERT_EQ(rc, 0) << out;
  std::string claim;
  ASSERT_TRUE(eventually(
      [&] {
        claim = jsonpath("pod late", "{.status.resourceClaimStatuses[0].resourceClaimName}");
        return !claim.empty() && !jsonpath("resourceclaim " + claim, "{.metadata.uid}").empty();
      },
      60s))
      << kubectl("describe pod -n acme late");
  kubectl("patch gpudeviceclass h200-dra --type merge -p '{\"spec\":{\"creationPaused\":true}}'", &rc);
  ASSERT_EQ(rc, 0);
  std::this_thread::sleep_for(3s);  // the extender's watch delivers the paused class
  kubectl("patch pod -n acme late --type json -p '[{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}]'", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(
      eventually([] { return eventsOf("late").find("creation in pool h200-dra is closed") != std::string::npos; }, 60s))
      << eventsOf("late");
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(jsonpath("pod late", "{.spec.nodeName}"), "") << "placed into a closed pool";
  EXPECT_EQ(jsonpath("resourceclaim " + claim, "{.status.allocation}"), "") << "allocated in a closed pool";
  // Open again: the pod (nudged by an update, as any change to it would) is placed.
  kubectl("patch gpudeviceclass h200-dra --type merge -p '{\"spec\":{\"creationPaused\":false}}'", &rc);
  ASSERT_EQ(rc, 0);
  std::this_thread::sleep_for(2s);
  kubectl("label pod -n acme late nudged=yes", &rc);
  EXPECT_TRUE(eventually([] { return !jsonpath("pod late", "{.spec.nodeName}").empty(); }, 90s))
      << kubectl("describe pod -n acme late");
}

TEST(DraPlacement, AClaimPodNamingAnotherSchedulerIsPointedAtTallysAndMarked) {
  int rc = 0;
  const std::string out =
      applyYaml(claimPod("elsewhere", "resourceClaimTemplateName: one-h200", "  schedulerName: my-scheduler\n"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(jsonpath("pod elsewhere", "{.spec.schedulerName}"), "default-scheduler");
  EXPECT_EQ(markerOf("elsewhere", "requests"), "1");
  EXPECT_TRUE(eventually([] { return !jsonpath("pod elsewhere", "{.spec.nodeName}").empty(); }, 90s))
      << kubectl("describe pod -n acme elsewhere");
  // A pod without claims or extended resources is none of the doors' business.
  applyYaml(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: plain, namespace: acme}\nspec:\n  schedulerName: "
      "my-scheduler\n  containers:\n  - {name: main, image: x}\n",
      &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(jsonpath("pod plain", "{.spec.schedulerName}"), "my-scheduler");
  EXPECT_EQ(markerOf("plain", "requests"), "");
}

}  // namespace
}  // namespace tally::runtime::e2e
