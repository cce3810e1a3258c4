// The quota controller and the Organization webhook against a real
// kube-apiserver: the real tally-controller (one replica, leader) applies
// add-on grants into the HRQ plan-quota with server-side apply, takes back a
// hand edit of its key and leaves other keys alone, follows billing-plans,
// and writes nothing after a restart on a converged cluster; the test plays
// HNC by writing the HRQ's status, from which the Organization's status
// follows. The API server calls /validate/organizations over HTTPS: an add-on
// reduction under a held device is refused naming it (also at --dry-run=server)
// and admitted once the device is gone; an increase that would break the
// pool's invariant is refused. With billing-plans gone, plan-quota is left as
// it is and a Warning Event says why.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-e2e-organizations";
const std::string kKey = std::string("requests.") + kH200;

Replica* replica = nullptr;
std::string ledgerDir;

// The ledger record of a one-device reservation for project acme-ml, in `state`.
void writeRecord(const std::string& state) {
  std::string status = "status:\n  activatedAt: \"2026-10-01T00:00:00Z\"\n  evidenceRevision: evidence/e2e-7\n";
  if (state == "released") status += "  releasedAt: \"2026-11-01T00:00:00Z\"\n";
  std::ofstream(ledgerDir + "/gpu-res-7.yaml.tmp")
      << "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: gpu-res-7\n"
      << "spec:\n  organization: acme\n  project: acme-ml\n  profileId: h200\n  devices: 1\n  state: " << state
      << "\n  requestedAt: \"2026-09-20T09:00:00Z\"\n  startsAt: \"2026-10-01T00:00:00Z\"\n"
      << "  endsAt: \"2027-10-01T00:00:00Z\"\n  addonId: h200-reserved\n  billingReference: OPS-7\n"
      << "  approvedBy:\n    product: pat@example.com\n    sre: sam@example.com\n"
      << status;
  std::filesystem::rename(ledgerDir + "/gpu-res-7.yaml.tmp", ledgerDir + "/gpu-res-7.yaml");
}

std::string projectQuota() { return kubectl("get resourcequota -n acme-ml project-quota -o jsonpath={.spec}"); }

std::string billingPlans(int devicesPerQuota) {
  return std::string("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: billing-plans, namespace: kube-dc}\n") +
         "data:\n  plans.yaml: |\n    addons:\n      h200-quota:\n        selfService: true\n        gpu:\n" +
         "          h200: {devices: " + std::to_string(devicesPerQuota) + "}\n" +
         "      h200-reserved:\n        selfService: false\n        gpu:\n          h200: {devices: 1}\n";
}

// kubectl annotate of the add-on assignment; rc and output back.
std::string assign(int quantity, int* rc, const std::string& extra = "") {
  return kubectl("annotate organization -n acme acme --overwrite " + extra +
                     " 'billing.kube-dc.com/addons=[{\"addonId\":\"h200-quota\",\"quantity\":" +
                     std::to_string(quantity) + "}]' 2>&1",
                 rc);
}

std::string hard(const std::string& key) {
  return kubectl("get hrq -n acme plan-quota -o go-template='{{index .spec.hard \"" + key + "\"}}'");
}

std::string resourceVersion(const std::string& what) {
  return kubectl("get " + what + " -o jsonpath={.metadata.resourceVersion}");
}

// The sum of a counter's series whose labels contain `labels`.
double metric(const std::string& name, const std::string& labels) { return metricOf(*replica, name, labels); }

Replica start() {
  Replica r = startReplica("quota-a", kConfiguration,
                           {"--quota-resync-interval=2s", "--ledger-dir=" + ledgerDir, "--ledger-interval=1s"});
  EXPECT_GT(r.pid, 0);
  EXPECT_TRUE(eventually([&] {
    return httpStatus("http://127.0.0.1:" + std::to_string(r.opsPort) + "/readyz") == 200 && leaseHolder() == "quota-a";
  })) << "replica never became ready and leader; log: "
      << r.log;
  EXPECT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
  return r;
}

// Points the configuration at the replica and waits until the API server
// calls it: the caBundle and a new url reach its webhook client late, so a
// change the webhook refuses (an add-on billing-plans does not define) is
// tried until it is refused by Tally.
bool webhookAnswers() {
  int rc = 0;
  applyYaml(shippedWebhooks(kConfiguration, replica->webhookPort, {{"organizations"}}), &rc);
  if (rc != 0) return false;
  return eventually([] {
    int code = 0;
    std::string out = kubectl(
        "annotate organization -n acme acme --overwrite --dry-run=server "
        "'billing.kube-dc.com/addons=[{\"addonId\":\"warmup\",\"quantity\":1}]' 2>&1",
        &code);
    return code != 0 && out.find("tally: [AddonUnknown]") != std::string::npos;
  });
}

class QuotaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "quota-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "kube-dc"}) kubectl(std::string("create namespace ") + ns, &rc);
    applyYaml(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: acme\n  labels: {acme.tree.hnc.x-k8s.io/depth: \"0\"}\n"
        "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: acme-ml\n"
        "  labels: {acme-ml.tree.hnc.x-k8s.io/depth: \"0\", acme.tree.hnc.x-k8s.io/depth: \"1\"}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(gpuNodes("gpu-", 2, 4));  // 8 H200 devices: spare 1, 7 to sell
    applyYaml(gpuClass("h200", kH200, 8), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(billingPlans(1), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml("apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata: {name: acme, namespace: acme}\nspec: {}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    ledgerDir = (std::filesystem::temp_directory_path() / ("quota-e2e-ledger-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(ledgerDir);
    writeRecord("active");
    replica = new Replica(start());
    ASSERT_TRUE(webhookAnswers()) << "the API server never reached the webhook";
  }

  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new QuotaEnvironment);

TEST(Quota, EveryGpuKeyIsHeldAtZeroBeforeAnyAddon) {
  ASSERT_TRUE(eventually([] { return hard(kKey) == "0"; })) << hard(kKey);
}

TEST(Quota, AddonsBecomePlanQuotaAndHncsReportBecomesOrganizationStatus) {
  int rc = 0;
  std::string out = assign(3, &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return hard(kKey) == "3"; })) << hard(kKey);
  // The test plays HNC: it reports hard and used in the HRQ's status.
  kubectl("patch hrq -n acme plan-quota --subresource=status --type=merge -p '{\"status\":{\"hard\":{\"" + kKey +
              "\":\"3\"},\"used\":{\"" + kKey + "\":\"1\"}}}'",
          &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] {
    return kubectl(
               "get organization -n acme acme -o "
               "jsonpath={.status.quotaUsage.accelerators.h200.devices.hard}/"
               "{.status.quotaUsage.accelerators.h200.devices.used}") == "3/1";
  })) << kubectl("get organization -n acme acme -o yaml");
  EXPECT_NE(kubectl("get events -n acme --field-selector reason=QuotaApplied -o jsonpath={.items[*].message}")
                .find("plan-quota"),
            std::string::npos);
}

TEST(Quota, HandEditOfTallysKeyIsTakenBackAndOtherKeysStay) {
  int rc = 0;
  kubectl("patch hrq -n acme plan-quota --type=merge -p '{\"spec\":{\"hard\":{\"requests.cpu\":\"10\",\"" + kKey +
              "\":\"7\"}}}'",
          &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return hard(kKey) == "3"; })) << hard(kKey);
  EXPECT_EQ(hard("requests.cpu"), "10");
  std::this_thread::sleep_for(3s);  // a resync later, still so
  EXPECT_EQ(hard("requests.cpu"), "10");
  EXPECT_EQ(hard(kKey), "3");
}

TEST(Quota, BillingPlanChangeConverges) {
  int rc = 0;
  applyYaml(billingPlans(2), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return hard(kKey) == "6"; })) << hard(kKey);
}

TEST(Quota, RestartOnAConvergedClusterWritesNothing) {
  // HNC catches up, so the status is converged too.
  int rc = 0;
  kubectl("patch hrq -n acme plan-quota --subresource=status --type=merge -p '{\"status\":{\"hard\":{\"" + kKey +
              "\":\"6\"}}}'",
          &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] {
    return kubectl("get organization -n acme acme -o jsonpath={.status.quotaUsage.accelerators.h200.devices.hard}") ==
           "6";
  }));
  ASSERT_TRUE(eventually([] { return metric("tally_controller_quota_orgs_converged", "") == 1; }));
  const std::string hrqVersion = resourceVersion("hrq -n acme plan-quota");
  const std::string orgVersion = resourceVersion("organization -n acme acme");
  stopReplica(*replica, SIGTERM);
  *replica = start();
  ASSERT_TRUE(webhookAnswers()) << "the API server never reached the restarted replica";
  // Two resyncs of the new leader, each finding everything as it should be.
  ASSERT_TRUE(eventually([] { return metric("tally_controller_quota_applies_total", "result=\"unchanged\"") >= 6; }))
      << metricsOf(*replica);
  EXPECT_EQ(metric("tally_controller_quota_applies_total", "result=\"applied\""), 0) << metricsOf(*replica);
  EXPECT_EQ(metric("tally_controller_quota_orgs_converged", ""), 1);
  EXPECT_EQ(resourceVersion("hrq -n acme plan-quota"), hrqVersion);
  EXPECT_EQ(resourceVersion("organization -n acme acme"), orgVersion);
  EXPECT_EQ(hard(kKey), "6");
  EXPECT_EQ(hard("requests.cpu"), "10");
}

TEST(Quota, ProjectReservationCapsItsProjectUntilReleased) {
  ASSERT_TRUE(eventually([] { return projectQuota().find(kKey + "\":\"1\"") != std::string::npos; })) << projectQuota();
  writeRecord("releasing");  // a release keeps its capacity until it is released
  std::this_thread::sleep_for(3s);
  EXPECT_NE(projectQuota().find(kKey + "\":\"1\""), std::string::npos) << projectQuota();
  writeRecord("released");
  ASSERT_TRUE(eventually([] { return projectQuota().find(kKey) == std::string::npos; })) << projectQuota();
}

TEST(OrganizationWebhook, ReductionUnderAHeldDeviceIsRefusedNamingItThenAdmittedOnceItGoes) {
  int rc = 0;
  applyYaml(device("acme", "held", "h200", 3), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}") == "Bound"; }))
      << kubectl("get gpudevice -n acme held -o yaml");
  // quantity 1 grants 2 devices; 3 are held.
  for (const std::string extra : {"--dry-run=server", ""}) {
    std::string out = assign(1, &rc, extra);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("denied the request: tally: [AddonReductionBlocked]"), std::string::npos) << out;
    EXPECT_NE(out.find("gpudevice/acme/held: 3"), std::string::npos) << out;
    std::printf("%s", out.c_str());
  }
  EXPECT_EQ(hard(kKey), "6");
  kubectl("delete gpudevice -n acme held --wait=true --timeout=60s", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] {
    int code = 0;
    assign(1, &code);
    return code == 0;
  })) << assign(1, &rc);
  ASSERT_TRUE(eventually([] { return hard(kKey) == "2"; })) << hard(kKey);
}

TEST(OrganizationWebhook, IncreaseThatBreaksThePoolInvariantIsRefused) {
  int rc = 0;
  // 4 x 2 = 8 devices of quota on 8 devices with 1 spare (gpu-res-7 is released).
  std::string out = assign(4, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("tally: [InvariantBroken]"), std::string::npos) << out;
  EXPECT_NE(out.find("healthy 8 >= reserved 0 + non-reserved hard quota 8 + spare 1"), std::string::npos) << out;
  std::printf("%s", out.c_str());
  out = assign(3, &rc);  // 6 + 1 <= 8
  EXPECT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return hard(kKey) == "6"; })) << hard(kKey);
}

// Its own suite, run last: it deletes the catalogue.
TEST(QuotaWithoutCatalogue, UnreadableCatalogueLeavesPlanQuotaAsItIsAndSaysWhy) {
  int rc = 0;
  kubectl("delete configmap -n kube-dc billing-plans", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] {
    return kubectl("get events -n acme --field-selector reason=QuotaApplyFailed -o jsonpath={.items[*].message}")
               .find("billing-plans") != std::string::npos;
  })) << kubectl("get events -n acme");
  ASSERT_TRUE(eventually([] { return metric("tally_controller_quota_applies_total", "result=\"unknown\"") >= 1; }));
  std::this_thread::sleep_for(3s);  // a resync later, still not rewritten to zero
  EXPECT_EQ(hard(kKey), "6");
}

}  // namespace
}  // namespace tally::runtime::e2e
