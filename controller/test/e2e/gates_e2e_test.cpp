// Gates fail closed (SPEC 3.5), with the real tally-controller binary behind
// the real kube-apiserver's webhooks:
//  * a pool no auditor has decided (a replica that never leads: another holds
//    its Lease) is closed at its doors, "not audited yet";
//  * spec.creationPaused closes the doors at once on their own snapshot,
//    before the auditor writes the class's status again;
//  * with the auditor disabled, the doors evaluate the gate function
//    themselves: a clean pool is open with nothing published, and a pause
//    closes it;
//  * a GPU order in a namespace no Organization holds is refused under the
//    default tenancy policy.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-gates-e2e";

std::string gateStatus() {
  return kubectl(R"(get gpudeviceclass h200 -o 'jsonpath={.status.conditions[?(@.type=="CreationOpen")].status}')");
}

void setPaused(bool paused) {
  int rc = 0;
  const std::string out =
      kubectl(std::string("patch gpudeviceclass h200 --type merge -p '{\"spec\":{\"creationPaused\":") +
                  (paused ? "true" : "false") + "}}'",
              &rc);
  ASSERT_EQ(rc, 0) << out;
}

// Starts `identity` serving the GPUDevice and raw GPU pod doors of
// kConfiguration, and waits until it is ready.
Replica serving(const std::string& identity, const std::vector<std::string>& extraArgs) {
  Replica r = startReplica(identity, kConfiguration, extraArgs);
  EXPECT_GT(r.pid, 0);
  int rc = 0;
  applyYaml(shippedWebhooks(kConfiguration, r.webhookPort, {{"gpudevices"}, {"gpu-pods", {"acme"}}}), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(eventually([&] {
    return httpStatus("http://127.0.0.1:" + std::to_string(r.opsPort) + "/readyz") == 200;
  })) << identity
      << " never became ready; log: " << r.log;
  return r;
}

std::string gpuPod(const std::string& name) {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
         ", namespace: acme}\nspec:\n  schedulerName: tally-scheduler\n  containers:\n  - name: c\n    image: x\n"
         "    resources:\n      limits: {" +
         kH200 + ": 1}\n";
}

class GatesEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "gates-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("gates-", 1, 4));
    applyYaml(gpuClass("h200", kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
  }
  void TearDown() override { cluster().down(); }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new GatesEnvironment);

// The tests run in order: the first needs the class as created, with no status.
TEST(GatesE2e, APoolNoAuditorDecidedIsClosedAtEveryDoorNotAuditedYet) {
  int rc = 0;
  // Another holds the Lease this replica elects on, for an hour: it never
  // leads, so its auditor never publishes a gate.
  applyYaml(
      "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: tally-gates-absent, namespace: tally-system}\n"
      "spec: {holderIdentity: absent, leaseDurationSeconds: 3600, renewTime: \"" +
          runCommand("date -u +%Y-%m-%dT%H:%M:%S.000000Z | tr -d '\\n'") + "\"}\n",
      &rc);
  ASSERT_EQ(rc, 0);
  // The serving certificate is made by a leader: one runs first without an
  // auditor (it publishes no gate), injects the caBundle, and stops.
  Replica seed = serving("seed", {"--enable-pool-auditor=false"});
  ASSERT_TRUE(eventually([] {
    return !kubectl("get validatingwebhookconfiguration " + std::string(kConfiguration) +
                    " -o jsonpath='{.webhooks[0].clientConfig.caBundle}'")
                .empty();
  })) << "log: "
      << seed.log;
  stopReplica(seed, SIGTERM);
  Replica standby = serving("standby", {"--leader-election-id=tally-gates-absent"});
  EXPECT_EQ(gateStatus(), "") << "no auditor leads: nothing is published";

  std::string out = applyYaml(device("acme", "order", "h200", 1), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[GateClosed]"), std::string::npos) << out;
  EXPECT_NE(out.find("pool h200 is not audited yet"), std::string::npos) << out;

  out = applyYaml(gpuPod("raw"), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("pool h200 is not audited yet"), std::string::npos) << out;
  stopReplica(standby, SIGTERM);
}

// The auditor writes only after its debounce (15 s here): the pause acts at
// the door first, while the published condition still says open.
TEST(GatesE2e, APauseClosesTheDoorsOnTheirOwnSnapshotBeforeTheAuditorWrites) {
  Replica audited = serving("audited", {"--audit-debounce=15s", "--audit-interval=1h"});
  ASSERT_TRUE(eventually([] { return gateStatus() == "True"; }, 60s)) << "log: " << audited.log;
  int rc = 0;
  std::string out = applyYaml(device("acme", "before-pause", "h200", 1), &rc);
  EXPECT_EQ(rc, 0) << out;

  setPaused(true);
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "paused-order", "h200", 1), &rc);
        return rc != 0;
      },
      10s))
      << out;
  EXPECT_NE(out.find("paused by the operator (spec.creationPaused)"), std::string::npos) << out;
  EXPECT_EQ(gateStatus(), "True") << "the door acted before the auditor's next write";
  setPaused(false);
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "after-pause", "h200", 1), &rc);
        return rc == 0;
      },
      10s))
      << out;
  kubectl("delete gpudevices -n acme --all --wait=false");
  stopReplica(audited, SIGTERM);
}

// --enable-pool-auditor=false: nobody publishes, and the doors evaluate the
// gate function on their own snapshot: the pool audits clean (open), a pause
// closes it.
TEST(GatesE2e, WithTheAuditorDisabledTheDoorsEvaluateTheGateThemselves) {
  kubectl("delete gpudeviceclass h200 --wait=true");
  int rc = 0;
  applyYaml(gpuClass("h200", kH200, 4), &rc);
  ASSERT_EQ(rc, 0);
  Replica solo = serving("solo", {"--enable-pool-auditor=false"});
  std::string out;
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "evaluated", "h200", 1), &rc);
        return rc == 0;
      },
      20s))
      << out << "\nlog: " << solo.log;
  EXPECT_EQ(gateStatus(), "") << "no auditor: nothing is published";
  setPaused(true);
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "evaluated-paused", "h200", 1), &rc);
        return rc != 0;
      },
      10s))
      << out;
  EXPECT_NE(out.find("paused by the operator (spec.creationPaused)"), std::string::npos) << out;
  stopReplica(solo, SIGTERM);
}

// The default policy (--unorganized-gpu-namespaces=refuse): the doors refuse
// a GPU order in a namespace no Organization holds, naming the namespace and
// the flag; once an Organization holds it, the same order is admitted.
TEST(GatesE2e, GpuOrdersOutsideEveryOrganizationAreRefusedUnderTheDefaultPolicy) {
  kubectl("delete gpudevices -n acme --all --wait=true");
  setPaused(false);
  Replica strict = serving("strict", {"--enable-pool-auditor=false", "--unorganized-gpu-namespaces=refuse"});
  std::string out;
  int rc = 0;
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "stray", "h200", 1), &rc);
        return rc != 0 && out.find("[NamespaceUnorganized]") != std::string::npos;
      },
      20s))
      << out << "\nlog: " << strict.log;
  EXPECT_NE(out.find("namespace acme is under no Organization"), std::string::npos) << out;
  EXPECT_NE(out.find("--unorganized-gpu-namespaces=refuse"), std::string::npos) << out;
  out = applyYaml(gpuPod("stray-pod"), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("namespace acme is under no Organization"), std::string::npos) << out;

  out = applyYaml(
      "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata: {name: acme, namespace: acme}\n"
      "spec: {displayName: Acme}\n",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_TRUE(eventually(
      [&] {
        out = applyYaml(device("acme", "organized", "h200", 1), &rc);
        return rc == 0;
      },
      20s))
      << out;
  stopReplica(strict, SIGTERM);
}

}  // namespace
}  // namespace tally::runtime::e2e
