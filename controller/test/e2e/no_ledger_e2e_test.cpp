// The real tally-controller binary as the base runs it: no --ledger-dir and no
// --ledger-configmap, against a real kube-apiserver with kwok nodes. Two
// pools: h200, whose organization may hold a reservation add-on, and l40s,
// which no reservation add-on names.
//
// A ledger nobody configured is not stale: past --audit-stale-after every
// gate stays open. An organization holding a reservation add-on of h200 with
// no ledger configured closes h200 (LedgerNotConfigured, naming the missing
// flag); l40s is not affected. And the auditor sees over-commit: a pod with a
// preset spec.nodeName on a node whose units a Bound GPUDevice holds makes
// used + held above served a NodeOvercommitted finding naming the node.

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kL40s = "nvidia.com/AD102GL_L40S";
constexpr int kStaleAfterSeconds = 20;

Replica* replica = nullptr;
std::chrono::steady_clock::time_point startedAt;

std::string field(const std::string& pool, const std::string& jsonpath) {
  return kubectl("get gpudeviceclass " + pool + " -o jsonpath='" + jsonpath + "'");
}
std::string gate(const std::string& pool) {
  return field(pool, "{.status.conditions[?(@.type==\"CreationOpen\")].status}");
}
std::string gateReason(const std::string& pool) {
  return field(pool, "{.status.conditions[?(@.type==\"CreationOpen\")].reason}");
}
std::string findingCodes(const std::string& pool) { return field(pool, "{.status.findings[*].code}"); }
std::string findingMessages(const std::string& pool) { return field(pool, "{.status.findings[*].message}"); }
std::string describe(const std::string& pool) {
  return pool + ": gate " + gate(pool) + " (" + gateReason(pool) + "), findings [" + findingCodes(pool) + "] " +
         findingMessages(pool);
}

// `tallyctl audit` live, with `flags` (the ledger's); its exit code in `rc`.
std::string tallyctlAudit(const std::string& flags, int* rc) {
  return runCommand(std::string(TALLYCTL_BINARY) + " audit --kubeconfig " + cluster().kubeconfig() +
                        " --billing-plans kube-dc/billing-plans " + flags + " 2>&1",
                    rc);
}

std::string organization(const std::string& addons) {
  return "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata:\n  name: acme\n  namespace: acme\n"
         "  annotations:\n    billing.kube-dc.com/addons: '" +
         addons + "'\n";
}

class NoLedgerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "no-ledger-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme", "kube-dc", "outsider"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("nl-", 2, 4));
    ASSERT_TRUE(gpuNodes("nl-l40s-", 1, 2, kL40s));
    applyYaml(gpuClass("h200", kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("l40s", kL40s, 2), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: billing-plans, namespace: kube-dc}\n"
        "data:\n  plans.yaml: |\n    addons:\n      h200-reserved:\n        selfService: false\n"
        "        gpu:\n          h200: {devices: 1}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    // The base's flags: no ledger source. Live caches are confirmed every
    // 15 s, within the 20 s bound.
    startedAt = std::chrono::steady_clock::now();
    replica = new Replica(startReplica("no-ledger-a", "tally-no-ledger-e2e",
                                       {"--audit-debounce=200ms", "--audit-convergence=4s",
                                        "--audit-stale-after=" + std::to_string(kStaleAfterSeconds) + "s",
                                        "--audit-interval=1h", "--billing-plans=kube-dc/billing-plans"}));
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "never ready; log: "
        << replica->log;
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
  }
  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new NoLedgerEnvironment);

TEST(NoLedgerE2e, TheBasesConfigurationPastTheStaleBoundKeepsEveryGateOpen) {
  for (const char* pool : {"h200", "l40s"}) {
    ASSERT_TRUE(eventually([&] { return gate(pool) == "True"; }, 30s)) << describe(pool);
  }
  // Well past --audit-stale-after since the controller started: the ledger
  // was confirmed once, at start, by nobody since.
  std::this_thread::sleep_until(startedAt + std::chrono::seconds(kStaleAfterSeconds + 10));
  for (const char* pool : {"h200", "l40s"}) {
    EXPECT_EQ(gate(pool), "True") << describe(pool);
    EXPECT_EQ(findingCodes(pool), "") << describe(pool);
  }
  // tallyctl live, as the controller is configured (no ledger flag), gives
  // the answer the dashboard shows.
  int rc = 0;
  const std::string out = tallyctlAudit("", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("StaleCapacity"), std::string::npos) << out;
}

TEST(NoLedgerE2e, AReservationAddonWithoutALedgerClosesItsPoolNamingTheMissingFlag) {
  int rc = 0;
  std::string out = applyYaml(organization(R"([{"addonId":"h200-reserved","quantity":1}])"), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually(
      [] { return gate("h200") == "False" && findingCodes("h200").find("LedgerNotConfigured") != std::string::npos; },
      30s))
      << describe("h200");
  EXPECT_EQ(gateReason("h200"), "AuditFailed") << describe("h200");
  EXPECT_NE(findingMessages("h200").find("--ledger-dir or --ledger-configmap"), std::string::npos) << describe("h200");
  EXPECT_EQ(findingCodes("h200").find("StaleCapacity"), std::string::npos) << describe("h200");
  // The pool no reservation add-on names is not affected.
  EXPECT_EQ(gate("l40s"), "True") << describe("l40s");
  EXPECT_EQ(findingCodes("l40s"), "") << describe("l40s");

  // tallyctl live says the same, and which flag is missing.
  std::string audit = tallyctlAudit("", &rc);
  EXPECT_EQ(rc, 1) << audit;
  EXPECT_NE(audit.find("LedgerNotConfigured"), std::string::npos) << audit;
  EXPECT_NE(audit.find("to clear: configure the reservation ledger"), std::string::npos) << audit;
  // Given a ledger ConfigMap holding the reservation's record, it reads it
  // live: the add-on is accounted for.
  out = applyYaml(
      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpu-reservation-ledger, namespace: kube-dc}\ndata:\n"
      "  gpu-res-1.yaml: |\n    apiVersion: operations.kube-dc.com/v1alpha1\n    kind: GPUReservationRecord\n"
      "    metadata:\n      id: gpu-res-1\n    spec:\n      organization: acme\n      project: \"\"\n"
      "      profileId: h200\n      devices: 1\n      state: pending\n"
      "      requestedAt: \"2026-09-20T09:00:00Z\"\n      startsAt: \"2026-10-01T00:00:00Z\"\n"
      "      addonId: h200-reserved\n      billingReference: OPS-1\n",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  audit = tallyctlAudit("--ledger-configmap kube-dc/gpu-reservation-ledger", &rc);
  EXPECT_EQ(audit.find("LedgerNotConfigured"), std::string::npos) << audit;
  EXPECT_EQ(audit.find("MissingLedgerRecord"), std::string::npos) << audit;
  EXPECT_NE(audit.find("h200"), std::string::npos) << audit;

  out = applyYaml(organization("[]"), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return findingCodes("h200").find("LedgerNotConfigured") == std::string::npos; }, 30s))
      << describe("h200");
}

TEST(NoLedgerE2e, APodPlacedAroundTallyOnUnitsADeviceHoldsIsAnOvercommitFinding) {
  ASSERT_TRUE(eventually([] { return gate("l40s") == "True"; }, 30s)) << describe("l40s");
  int rc = 0;
  // A stopped VM's device holds both units of the L40S node.
  std::string out = applyYaml(device("outsider", "stopped-vm", "l40s", 2), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] {
    return kubectl("get gpudevice -n outsider stopped-vm -o jsonpath={.status.phase}") == "Bound";
  })) << kubectl("get gpudevice -n outsider stopped-vm -o yaml");
  EXPECT_EQ(gate("l40s"), "True") << describe("l40s");
  // Another scheduler's pod, spec.nodeName preset: the kubelet sees 2 free units.
  out = applyYaml(std::string("apiVersion: v1\nkind: Pod\nmetadata: {name: rogue, namespace: outsider}\nspec:\n") +
                      "  nodeName: nl-l40s-0\n  tolerations: [{operator: Exists}]\n  containers:\n  - name: c\n" +
                      "    image: trainer\n    resources:\n      requests: {" + kL40s + ": 1}\n      limits: {" +
                      kL40s + ": 1}\n",
                  &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually(
      [] { return gate("l40s") == "False" && findingCodes("l40s").find("NodeOvercommitted") != std::string::npos; },
      30s))
      << describe("l40s");
  EXPECT_EQ(gateReason("l40s"), "AuditFailed");
  const std::string messages = findingMessages("l40s");
  for (const char* part :
       {"node nl-l40s-0 serves 2", "3 are in use", "outsider/stopped-vm (2)", "pods: outsider/rogue (1)"}) {
    EXPECT_NE(messages.find(part), std::string::npos) << part << " in " << messages;
  }
  EXPECT_NE(field("l40s", "{.status.findings[*].subject}").find("node/nl-l40s-0"), std::string::npos);
  // The pod leaves: the finding clears (the gate then awaits acknowledgement).
  kubectl("delete pod -n outsider rogue --grace-period=0 --force", &rc);
  ASSERT_TRUE(eventually([] { return findingCodes("l40s").find("NodeOvercommitted") == std::string::npos; }, 30s))
      << describe("l40s");
  EXPECT_EQ(gateReason("l40s"), "AwaitingAcknowledgement") << describe("l40s");
}

}  // namespace
}  // namespace tally::runtime::e2e
