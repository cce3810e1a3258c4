// DRA pools end to end (SPEC 3.7, issue 29), on the real kube-apiserver,
// kube-controller-manager (its resource-claim controller creates the claims
// of a pod's templates), kube-scheduler (its DynamicResources plugin
// allocates them) and the real tally-controller serving the claim door. The
// test plays only the DRA driver: it publishes ResourceSlices.
//  (a) a claim from a template within budget is admitted, allocated by the
//      scheduler, charged to the tenant and its ancestor, and shown in
//      `tallyctl report`;
//  (b) a claim over an ancestor's budget is refused at create, naming it;
//  (c) a pool whose gate is closed refuses new claims, the running pod
//      untouched;
//  (d) a pool with resourceSliceCount 2 and one slice published is unknown:
//      claims refused, the finding shown; known again with the second slice;
//  (f) consumable capacity: four claims of a quarter of a device's memory
//      are admitted, the fifth refused; the allocator shares the device and
//      the claim is charged one share;
//  (g) a pod's extended-resource request served by DRA (kube-scheduler
//      makes its claim) is counted once;
//  (h) claims created at once for the last units: never more admitted than
//      the budget holds; 100 pods of one template racing for a pool of 50
//      devices: 50 claims admitted and allocated on 50 distinct devices, the
//      rest refused by the pool, nothing over budget, each device charged
//      once;
//  (e) devices tainted NoSchedule (by the driver in its slice, and by a
//      DeviceTaintRule) leave the pool's healthy count, and the invariant
//      fails once the quota sold exceeds what is left.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-dra-e2e";
constexpr const char* kDriver = "gpu.example.com";
// The budget key of the pools below: requests.<implicit extended resource of the DeviceClass>.
constexpr const char* kH200Key = "requests.deviceclass.resource.kubernetes.io/h200.example.com";
constexpr const char* kRaceKey = "requests.deviceclass.resource.kubernetes.io/r100.example.com";
constexpr int kRaceNodes = 5, kRaceDevicesPerNode = 10, kRacePods = 100, kRaceBudget = 55;

Replica controller;

std::string deviceClass(const std::string& name, const std::string& product) {
  return "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: " + name +
         "}\nspec:\n  selectors:\n  - cel: {expression: 'device.driver == \"" + kDriver + "\" && device.attributes[\"" +
         kDriver + "\"].productName == \"" + product + "\"'}\n";
}

std::string gpuDraClass(const std::string& name, const std::string& deviceClassName, const std::string& product) {
  return "apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata: {name: " + name +
         "}\nspec:\n  workload: pod\n  allocation: passthrough\n  maxCount: 8\n  dra:\n    driver: " + kDriver +
         "\n    deviceClassName: " + deviceClassName + "\n    attributes: {productName: " + product + "}\n";
}

// A slice as a driver publishes it: devices gpu-<first>.. of `product`, the
// device gpu-<tainted> (when given) tainted NoSchedule by the driver.
std::string slice(const std::string& name, const std::string& node, int generation, int sliceCount, int first,
                  int count, const std::string& product, int tainted = -1) {
  std::string out = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + name +
                    "}\nspec:\n  driver: " + kDriver + "\n  nodeName: " + node + "\n  pool: {name: " + node +
                    ", generation: " + std::to_string(generation) +
                    ", resourceSliceCount: " + std::to_string(sliceCount) + "}\n  devices:\n";
  for (int i = first; i < first + count; ++i) {
    out += "  - name: gpu-" + std::to_string(i) + "\n    attributes:\n      productName: {string: " + product +
           "}\n    capacity:\n      memory: {value: 141Gi}\n";
    if (i == tainted) out += "    taints:\n    - {key: gpu.example.com/xid, value: \"79\", effect: NoSchedule}\n";
  }
  return out;
}

// A shared pool: one L40S (48 GiB, several allocations allowed) on dra-2, a
// share is 12 GiB of its memory.
std::string quarterClass() {
  return std::string("apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata: {name: l40s-quarter}\n") +
         "spec:\n  workload: pod\n  allocation: shared\n  memoryMiB: 49152\n  maxCount: 4\n"
         "  share: {memoryMiB: 12288, corePercent: 25, maxSharesPerDevice: 4}\n  dra:\n    driver: " +
         kDriver +
         "\n    deviceClassName: l40s.example.com\n    attributes: {productName: L40S}\n"
         "    shareCapacity: memory\n";
}

std::string sharedSlice() {
  return std::string("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: dra-2-l40s}\nspec:\n") +
         "  driver: " + kDriver +
         "\n  nodeName: dra-2\n  pool: {name: dra-2, generation: 1, resourceSliceCount: 1}\n  devices:\n"
         "  - name: gpu-0\n    allowMultipleAllocations: true\n    attributes:\n      productName: {string: L40S}\n"
         "    capacity:\n      memory: {value: 48Gi}\n";
}

// A DeviceClass whose devices also serve pods' extended resource example.com/a10.
std::string extendedDeviceClass() {
  return std::string("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a10.example.com}\n") +
         "spec:\n  extendedResourceName: example.com/a10\n  selectors:\n  - cel: {expression: 'device.driver == \"" +
         kDriver + "\" && device.attributes[\"" + kDriver + "\"].productName == \"A10\"'}\n";
}

std::string quarterClaim(const std::string& name) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: " + name +
         ", namespace: beta}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n"
         "        deviceClassName: l40s.example.com\n        capacity: {requests: {memory: 12Gi}}\n";
}

std::string claim(const std::string& ns, const std::string& name, const std::string& deviceClassName, int count) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: " + name + ", namespace: " + ns +
         "}\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: " + deviceClassName +
         ", allocationMode: ExactCount, count: " + std::to_string(count) + "}\n";
}

std::string claimTemplate(const std::string& ns, const std::string& name, const std::string& deviceClassName,
                          int count) {
  return "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: " + name +
         ", namespace: " + ns +
         "}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: "
         "{deviceClassName: " +
         deviceClassName + ", allocationMode: ExactCount, count: " + std::to_string(count) + "}\n";
}

std::string claimPod(const std::string& ns, const std::string& name, const std::string& templateName) {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: " + ns +
         "}\nspec:\n  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: " + templateName +
         "}\n  containers:\n  - name: main\n    image: x\n    resources:\n      claims:\n      - {name: gpu}\n";
}

std::string create(const std::string& yaml, int* rc) {
  static std::atomic<int> n{0};
  const auto path = std::filesystem::temp_directory_path() /
                    ("dra-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".yaml");
  std::ofstream(path) << yaml;
  std::string out = kubectl("create -f " + path.string(), rc);
  std::filesystem::remove(path);
  return out;
}

std::string report() {
  return runCommand(std::string(TALLYCTL_BINARY) + " report -o json --unorganized-gpu-namespaces=allow --kubeconfig " +
                    cluster().kubeconfig() + " 2>&1");
}

bool reportShows(const std::string& needle) { return report().find(needle) != std::string::npos; }

// The report's object for `pool` (from its "pool" key to the next pool's),
// empty when the report has none.
std::string poolReport(const std::string& json, const std::string& pool) {
  const std::string anchor = "\"pool\":\"" + pool + "\",\"quotaUnit\"";
  const auto at = json.find(anchor);
  if (at == std::string::npos) return "";
  const auto next = json.find("\"quotaUnit\"", at + anchor.size());
  return json.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

// A scalar field of the pool's report ("2", "false"), empty when absent.
std::string poolField(const std::string& pool, const std::string& field) {
  const std::string object = poolReport(report(), pool);
  const std::string key = "\"" + field + "\":";
  const auto at = object.find(key);
  if (at == std::string::npos) return "";
  const auto from = at + key.size();
  return object.substr(from, object.find_first_of(",}", from) - from);
}

// kubectl's jsonpath output split at spaces.
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

class DraEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "dra-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name, /*controllerManager=*/true)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme", "acme-research", "beta", "gamma"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    // The test plays HNC's tree labels: acme-research under acme.
    kubectl("label namespace acme acme.tree.hnc.x-k8s.io/depth=0", &rc);
    ASSERT_EQ(rc, 0);
    kubectl("label namespace acme-research acme-research.tree.hnc.x-k8s.io/depth=0 acme.tree.hnc.x-k8s.io/depth=1",
            &rc);
    ASSERT_EQ(rc, 0);
    kubectl("label namespace gamma gamma.tree.hnc.x-k8s.io/depth=0", &rc);
    ASSERT_EQ(rc, 0);
    for (const auto& [prefix, count] : {std::pair<std::string, int>{"dra-", 4}, {"race-", kRaceNodes}}) {
      const std::string out =
          runCommand(cluster().bin() + "/tally-fixtures nodes --count " + std::to_string(count) + " --prefix " +
                         prefix + " --resource none --ready=false --wait-ready --timeout 120s --kubeconfig " +
                         cluster().kubeconfig() + " 2>&1",
                     &rc);
      ASSERT_EQ(rc, 0) << out;
    }
    // The race pool: kRaceNodes nodes of kRaceDevicesPerNode R100 each.
    for (const auto& yaml :
         {deviceClass("r100.example.com", "R100"), gpuDraClass("r100-dra", "r100.example.com", "R100")}) {
      const std::string applied = applyYaml(yaml, &rc);
      ASSERT_EQ(rc, 0) << applied;
    }
    for (int n = 0; n < kRaceNodes; ++n) {
      const std::string node = "race-" + std::to_string(n);
      const std::string applied = applyYaml(slice(node + "-gpus", node, 1, 1, 0, kRaceDevicesPerNode, "R100"), &rc);
      ASSERT_EQ(rc, 0) << applied;
    }
    applyYaml(std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
                  "metadata: {name: plan-quota, namespace: gamma}\nspec: {hard: {" + kRaceKey + ": \"" +
                  std::to_string(kRaceBudget) + "\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    for (const auto& yaml :
         {deviceClass("h200.example.com", "H200"), deviceClass("b200.example.com", "B200"),
          gpuDraClass("h200-dra", "h200.example.com", "H200"), gpuDraClass("b200-dra", "b200.example.com", "B200"),
          slice("dra-0-gpus", "dra-0", 1, 1, 0, 4, "H200"), deviceClass("l40s.example.com", "L40S"), quarterClass(),
          sharedSlice(), extendedDeviceClass(),
          gpuDraClass("a10-dra", "a10.example.com", "A10") + "  resourceName: example.com/a10\n",
          slice("dra-3-gpus", "dra-3", 1, 1, 0, 2, "A10")}) {
      const std::string applied = applyYaml(yaml, &rc);
      ASSERT_EQ(rc, 0) << applied;
    }
    // The organization's budget: 3 H200 for acme and everything under it.
    applyYaml(std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
                  "metadata: {name: plan-quota, namespace: acme}\nspec: {hard: {" + kH200Key + ": \"3\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    // The doors evaluate the gate themselves (no auditor publishes it here).
    controller = startReplica("dra-a", kConfiguration, {"--enable-pool-auditor=false"});
    ASSERT_GT(controller.pid, 0);
    const std::string webhooks = shippedWebhooks(kConfiguration, controller.webhookPort, {{"resourceclaims"}});
    ASSERT_FALSE(webhooks.empty());
    applyYaml(webhooks, &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(controller.opsPort) + "/readyz") == 200;
    })) << "tally-controller never became ready; log: "
        << controller.log;
    // The door is called: a claim over any budget is refused once it serves.
    ASSERT_TRUE(eventually([] {
      int created = 0;
      const std::string answer = create(claim("acme-research", "probe", "h200.example.com", 8), &created);
      if (created == 0) kubectl("delete resourceclaim -n acme-research probe --wait=false");
      return created != 0 && answer.find("tally: ") != std::string::npos;
    })) << "the claim door never answered";
  }
  void TearDown() override {
    stopReplica(controller, SIGTERM);
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new DraEnvironment);

std::string jsonpath(const std::string& what, const std::string& path) {
  return kubectl("get " + what + " -o 'jsonpath=" + path + "'");
}

// The tests run in order: each builds on the claims the previous left.
TEST(Dra, AClaimFromATemplateWithinBudgetIsAllocatedAndCharged) {
  int rc = 0;
  applyYaml(claimTemplate("acme-research", "one-h200", "h200.example.com", 1), &rc);
  ASSERT_EQ(rc, 0);
  applyYaml(claimPod("acme-research", "train", "one-h200"), &rc);
  ASSERT_EQ(rc, 0);
  // kube-controller-manager creates the claim (the door admits it: 1 of 3),
  // kube-scheduler allocates a device of dra-0 and binds the pod there.
  ASSERT_TRUE(eventually([] { return jsonpath("pod -n acme-research train", "{.spec.nodeName}") == "dra-0"; }, 90s))
      << kubectl("describe pod -n acme-research train");
  const std::string claimName =
      jsonpath("pod -n acme-research train", "{.status.resourceClaimStatuses[0].resourceClaimName}");
  ASSERT_FALSE(claimName.empty());
  EXPECT_EQ(jsonpath("resourceclaim -n acme-research " + claimName, "{.status.allocation.devices.results[0].driver}"),
            kDriver);
  // Charged to dra-0 and to acme-research's budget, up to acme: the report
  // shows the node's unit used, and the door now sees 1 of acme's 3 spent.
  EXPECT_TRUE(
      eventually([] { return reportShows(R"("name":"dra-0","pool":"h200-dra","unitsServed":4,"unitsUsed":1,)"); }, 30s))
      << report();
  const std::string out = create(claim("acme", "too-many", "h200.example.com", 3), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[BudgetExceeded]"), std::string::npos) << out;
  EXPECT_NE(out.find("acme/plan-quota"), std::string::npos) << out;
}

TEST(Dra, AClaimOverAnAncestorsBudgetIsRefusedAtCreate) {
  int rc = 0;
  // 1 used, 3 hard: 2 fit, 3 do not, whichever namespace of acme asks.
  std::string out = create(claim("acme-research", "three", "h200.example.com", 3), &rc);
  ASSERT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[BudgetExceeded]"), std::string::npos) << out;
  EXPECT_NE(out.find(kH200Key), std::string::npos) << out;
  EXPECT_EQ(kubectl("get resourceclaim -n acme-research three", &rc).find("NotFound") != std::string::npos, true);
  // A template's claim over budget: kube-controller-manager's create is
  // refused, so the pod gets no claim and is never scheduled.
  applyYaml(claimTemplate("acme-research", "three-h200", "h200.example.com", 3), &rc);
  ASSERT_EQ(rc, 0);
  applyYaml(claimPod("acme-research", "big", "three-h200"), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually(
      [] {
        return kubectl(
                   "get events -n acme-research --field-selector involvedObject.name=big -o "
                   "'jsonpath={.items[*].message}'")
                   .find("BudgetExceeded") != std::string::npos;
      },
      60s))
      << kubectl("get events -n acme-research");
  EXPECT_EQ(jsonpath("pod -n acme-research big", "{.spec.nodeName}"), "");
  kubectl("delete pod -n acme-research big --wait=false");
}

TEST(Dra, AClosedGateRefusesNewClaimsAndLeavesRunningOnesAlone) {
  int rc = 0;
  kubectl("patch gpudeviceclass h200-dra --type merge -p '{\"spec\":{\"creationPaused\":true}}'", &rc);
  ASSERT_EQ(rc, 0);
  std::string out;
  EXPECT_TRUE(eventually(
      [&] {
        out = create(claim("acme-research", "paused", "h200.example.com", 1), &rc);
        return rc != 0 && out.find("[GateClosed]") != std::string::npos;
      },
      30s))
      << out;
  EXPECT_EQ(jsonpath("pod -n acme-research train", "{.status.phase}"), "Running");
  kubectl("patch gpudeviceclass h200-dra --type merge -p '{\"spec\":{\"creationPaused\":false}}'", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually(
      [&] {
        out = create(claim("acme-research", "reopened", "h200.example.com", 1), &rc);
        return rc == 0;
      },
      30s))
      << out;
  kubectl("delete resourceclaim -n acme-research reopened");
}

TEST(Dra, APoolWithASliceMissingIsUnknownUntilItArrives) {
  int rc = 0;
  applyYaml(slice("dra-1-a", "dra-1", 1, 2, 0, 2, "B200"), &rc);
  ASSERT_EQ(rc, 0);
  std::string out;
  EXPECT_TRUE(eventually(
      [&] {
        out = create(claim("acme-research", "b200", "b200.example.com", 1), &rc);
        return rc != 0 && out.find("[DraPoolIncomplete]") != std::string::npos;
      },
      30s))
      << out;
  EXPECT_NE(out.find("1 of 2 slice(s) seen"), std::string::npos) << out;
  EXPECT_TRUE(eventually([] { return reportShows("DraPoolIncomplete"); }, 30s)) << report();
  applyYaml(slice("dra-1-b", "dra-1", 1, 2, 2, 2, "B200"), &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually(
      [&] {
        out = create(claim("acme-research", "b200", "b200.example.com", 4), &rc);
        return rc == 0;
      },
      30s))
      << out;
  EXPECT_FALSE(reportShows("DraPoolIncomplete")) << report();
  kubectl("delete resourceclaim -n acme-research b200");
}

TEST(Dra, FourQuarterClaimsShareADeviceAndTheFifthIsRefused) {
  int rc = 0;
  std::string out;
  for (int i = 0; i < 4; ++i) {
    out = create(quarterClaim("quarter-" + std::to_string(i)), &rc);
    ASSERT_EQ(rc, 0) << out;
  }
  out = create(quarterClaim("quarter-4"), &rc);
  ASSERT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[PoolInsufficient] pool l40s-quarter has 0 free shares"), std::string::npos) << out;
  // A pod using one of them: the allocator gives it a quarter of gpu-0, and
  // Tally charges one share of dra-2's four.
  const std::string pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: quarter, namespace: beta}\nspec:\n"
      "  resourceClaims:\n  - {name: gpu, resourceClaimName: quarter-0}\n  containers:\n"
      "  - name: main\n    image: x\n    resources:\n      claims:\n      - {name: gpu}\n";
  applyYaml(pod, &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return jsonpath("pod -n beta quarter", "{.spec.nodeName}") == "dra-2"; }, 90s))
      << kubectl("describe pod -n beta quarter");
  EXPECT_EQ(
      jsonpath("resourceclaim -n beta quarter-0", "{.status.allocation.devices.results[0].consumedCapacity.memory}"),
      "12Gi");
  EXPECT_TRUE(eventually(
      [] { return reportShows(R"("name":"dra-2","pool":"l40s-quarter","unitsServed":4,"unitsUsed":1,)"); }, 30s))
      << report();
}

TEST(Dra, AnExtendedResourcePodServedByDraIsCountedOnce) {
  int rc = 0;
  const std::string pod =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: a10, namespace: beta}\nspec:\n  containers:\n"
      "  - name: main\n    image: x\n    resources:\n      requests: {example.com/a10: \"1\"}\n"
      "      limits: {example.com/a10: \"1\"}\n";
  applyYaml(pod, &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return jsonpath("pod -n beta a10", "{.spec.nodeName}") == "dra-3"; }, 90s))
      << kubectl("describe pod -n beta a10");
  // kube-scheduler made a claim for the request and allocated it: the pod and
  // its claim hold one A10, not two.
  EXPECT_TRUE(eventually(
      [] {
        return kubectl(
                   "get resourceclaims -n beta -o "
                   "'jsonpath={.items[*].metadata.annotations.resource\\.kubernetes\\.io/extended-resource-claim}'")
                   .find("true") != std::string::npos;
      },
      30s))
      << kubectl("get resourceclaims -n beta -o yaml");
  EXPECT_TRUE(
      eventually([] { return reportShows(R"("name":"dra-3","pool":"a10-dra","unitsServed":2,"unitsUsed":1,)"); }, 30s))
      << report();
}

TEST(Dra, ClaimsCreatedAtOnceNeverSpendMoreThanTheBudget) {
  // acme holds 3, 1 is used by the running pod: 2 left; 12 claims of 1 at once.
  std::vector<std::thread> creators;
  std::atomic<int> admitted{0}, refused{0};
  for (int i = 0; i < 12; ++i) {
    creators.emplace_back([&, i] {
      int rc = 0;
      const std::string out = create(claim("acme-research", "race-" + std::to_string(i), "h200.example.com", 1), &rc);
      if (rc == 0) {
        ++admitted;
      } else {
        ++refused;
        EXPECT_NE(out.find("[BudgetExceeded]"), std::string::npos) << out;
      }
    });
  }
  for (auto& t : creators) t.join();
  EXPECT_EQ(admitted.load(), 2);
  EXPECT_EQ(refused.load(), 10);
  int rc = 0;
  const std::string claims = kubectl("get resourceclaims -n acme-research -o name", &rc);
  int races = 0;
  for (std::size_t at = claims.find("race-"); at != std::string::npos; at = claims.find("race-", at + 1)) ++races;
  EXPECT_EQ(races, 2) << claims;
}

TEST(Dra, HundredPodsRacingForFiftyDevicesGetFiftyEachChargedOnce) {
  int rc = 0;
  applyYaml(claimTemplate("gamma", "one-r100", "r100.example.com", 1), &rc);
  ASSERT_EQ(rc, 0);
  std::string pods;
  for (int i = 0; i < kRacePods; ++i) pods += "---\n" + claimPod("gamma", "racer-" + std::to_string(i), "one-r100");
  const std::string created = create(pods, &rc);
  ASSERT_EQ(rc, 0) << created;
  // kube-controller-manager creates a claim per pod as fast as it can; the
  // door admits one per free device and refuses the rest, and keeps refusing
  // kube-controller-manager's retries.
  constexpr int devices = kRaceNodes * kRaceDevicesPerNode;
  auto bound = [] {
    int n = 0;
    for (const auto& node : words(jsonpath("pods -n gamma", "{.items[*].spec.nodeName}"))) n += node.empty() ? 0 : 1;
    return n;
  };
  ASSERT_TRUE(eventually([&] { return bound() == devices; }, 180s))
      << bound() << " of " << kRacePods << " pods bound; " << kubectl("get resourceclaims -n gamma");
  std::this_thread::sleep_for(10s);  // the refused pods' claims are retried meanwhile
  EXPECT_EQ(bound(), devices);
  // 50 claims, each allocated a device of its own.
  const auto claims = words(jsonpath("resourceclaims -n gamma", "{.items[*].metadata.name}"));
  EXPECT_EQ(claims.size(), static_cast<std::size_t>(devices));
  const auto allocated = words(jsonpath("resourceclaims -n gamma",
                                        "{range .items[*]}{.status.allocation.devices.results[0].pool}/"
                                        "{.status.allocation.devices.results[0].device} {end}"));
  EXPECT_EQ(allocated.size(), static_cast<std::size_t>(devices));
  EXPECT_EQ(std::set<std::string>(allocated.begin(), allocated.end()).size(), static_cast<std::size_t>(devices));
  for (const auto& device : allocated) EXPECT_NE(device.front(), '/') << "an unallocated claim";
  // The refused were refused by the pool, never by a budget that had room.
  const std::string events = kubectl("get events -n gamma -o 'jsonpath={.items[*].message}'");
  EXPECT_NE(events.find("[PoolInsufficient] pool r100-dra has 0 free"), std::string::npos) << events;
  EXPECT_EQ(events.find("[BudgetExceeded]"), std::string::npos) << events;
  // Each device charged once: every race node full in the report, and the
  // budget sees 50 in use, not 100.
  for (int n = 0; n < kRaceNodes; ++n) {
    const std::string node = "race-" + std::to_string(n);
    EXPECT_TRUE(eventually([&] {
      return reportShows("\"name\":\"" + node + "\",\"pool\":\"r100-dra\",\"unitsServed\":10,\"unitsUsed\":10,");
    })) << report();
  }
  const std::string out = create(claim("gamma", "over", "r100.example.com", 8), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("50 in use + 8 requested = 58, limit " + std::to_string(kRaceBudget)), std::string::npos) << out;
  EXPECT_EQ(poolField("r100-dra", "invariantHolds"), "true") << report();
  kubectl("delete pods -n gamma --all --wait=false");
}

TEST(Dra, TaintedDevicesLeaveTheHealthyCountAndTheInvariantFails) {
  // h200-dra: 4 devices on dra-0; acme, now an Organization, has been sold 3
  // of them (its plan-quota), so 4 >= 3 + a spare of 1 holds.
  int rc = 0;
  applyYaml("apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata: {name: acme, namespace: acme}\n", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return poolField("h200-dra", "nonReservedHardQuota") == "3"; })) << report();
  EXPECT_EQ(poolField("h200-dra", "invariantHolds"), "true") << report();
  EXPECT_EQ(poolField("h200-dra", "healthySchedulableDevices"), "4");
  // The driver taints gpu-2 in its slice; an administrator taints gpu-3.
  applyYaml(slice("dra-0-gpus", "dra-0", 1, 1, 0, 4, "H200", 2), &rc);
  ASSERT_EQ(rc, 0);
  applyYaml(std::string("apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: dra-0-gpu-3}\n") +
                "spec:\n  deviceSelector: {driver: " + kDriver + ", pool: dra-0, device: gpu-3}\n" +
                "  taint: {key: example.com/maintenance, value: planned, effect: NoSchedule}\n",
            &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually([] { return poolField("h200-dra", "healthySchedulableDevices") == "2"; })) << report();
  EXPECT_EQ(poolField("h200-dra", "invariantHolds"), "false") << report();
  EXPECT_NE(poolReport(report(), "h200-dra").find("HardQuotaAboveCapacity"), std::string::npos) << report();
  const std::string audit =
      runCommand(std::string(TALLYCTL_BINARY) + " audit --unorganized-gpu-namespaces=allow --kubeconfig " +
                     cluster().kubeconfig() + " 2>&1",
                 &rc);
  EXPECT_EQ(rc, 1) << audit;
  EXPECT_NE(audit.find("HardQuotaAboveCapacity"), std::string::npos) << audit;
  EXPECT_NE(audit.find("taint gpu.example.com/xid=79:NoSchedule"), std::string::npos) << audit;
  // Both taints lifted: the pool is whole and the invariant holds again.
  applyYaml(slice("dra-0-gpus", "dra-0", 1, 1, 0, 4, "H200"), &rc);
  ASSERT_EQ(rc, 0);
  kubectl("delete devicetaintrule dra-0-gpu-3", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(eventually([] { return poolField("h200-dra", "invariantHolds") == "true"; })) << report();
  EXPECT_EQ(poolField("h200-dra", "healthySchedulableDevices"), "4");
}

}  // namespace
}  // namespace tally::runtime::e2e
