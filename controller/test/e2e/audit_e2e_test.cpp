// The pool auditor of the real tally-controller binary against a real
// kube-apiserver calling its webhooks over HTTPS; kwok nodes, a temporary
// ledger directory, and a local stand-in Alertmanager (the one fake: it only
// serves the v2 alerts JSON).
//
// (g) `kubectl get gpudeviceclasses` is the pool's dashboard with the right
// figures; (e) live findings close the gate, each with its code in status:
// duplicate reservation id and an invalid record in the ledger, two
// transactions, a node whose active mode differs from the expected one, a
// firing alert (and an unreachable Alertmanager), an unknown add-on and a
// reservation add-on with no record; while closed, a GPUDevice order in the
// pool is refused by the real webhook with GateClosed and a Bound device stays
// Bound; cleared findings wait for two acknowledgements by two identities (one
// identity in both roles is refused by the webhook), then the gate reopens;
// Events record each change. Quota and capacity (the test plays HNC, writing
// the HRQ's status): a node cordoned under sold quota (HardQuotaAboveCapacity;
// a raw GPU pod and a VMI are refused too, a running pod and a Bound device
// are untouched), HNC lagging Tally's plan-quota (StatusDisagreement of the
// HRQ and of the Organization: Converging first, a failure beyond
// --audit-convergence; within it the gate reopens by itself), the ledger's
// directory gone (InvalidRecord at once, StaleCapacity beyond
// --audit-stale-after). (g) `tallyctl plan` live starts from the figures the
// auditor publishes.

#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <simdjson.h>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "tally/runtime/http/testing/stand_in.hpp"

namespace tally::runtime::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDeviceConfiguration = "tally-audit-e2e";
constexpr const char* kClassConfiguration = "tally-audit-class-e2e";
constexpr const char* kVmiConfiguration = "tally-audit-vmis-e2e";
constexpr const char* kOrganizationConfiguration = "tally-audit-organizations-e2e";
const std::string kKey = std::string("requests.") + kH200;

// A stand-in Alertmanager: answers every request with the body set last.
http::testing::StandIn* alertmanager = nullptr;
Replica* replica = nullptr;
fs::path ledgerDir;

std::string field(const std::string& jsonpath) {
  return kubectl("get gpudeviceclass h200 -o jsonpath='" + jsonpath + "'");
}
std::string gate() { return field("{.status.conditions[?(@.type==\"CreationOpen\")].status}"); }
std::string gateReason() { return field("{.status.conditions[?(@.type==\"CreationOpen\")].reason}"); }
std::string findingCodes() { return field("{.status.findings[*].code}"); }
std::string failureId() { return field("{.status.gateFailureId}"); }

// Closed by a failed audit with a finding of `code`.
::testing::AssertionResult closedWith(const std::string& code, const std::string& without = "") {
  if (eventually(
          [&] {
            const std::string codes = findingCodes();
            return gate() == "False" && codes.find(code) != std::string::npos &&
                   (without.empty() || codes.find(without) == std::string::npos);
          },
          30s)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "gate " << gate() << " (" << gateReason() << "), findings " << findingCodes()
                                       << "; wanted " << code;
}

std::string acks(const std::vector<std::array<std::string, 3>>& entries) {
  std::string out = "[";
  for (const auto& [id, role, who] : entries) {
    if (out.size() > 1) out += ",";
    out += R"({"failureId":")" + id + R"(","role":")" + role + R"(","identity":")" + who + R"("})";
  }
  return out + "]";
}

// A merge patch of spec.gateAcknowledgements as `user`.
std::string acknowledge(const std::string& user, const std::string& list, int* rc) {
  return kubectl("patch gpudeviceclass h200 --type=merge --as=" + user +
                     " --as-group=system:masters -p '{\"spec\":"
                     "{\"gateAcknowledgements\":" +
                     list + "}}' 2>&1",
                 rc);
}

// Findings cleared: awaiting acknowledgement of the failure; product alice and
// sre bob acknowledge it (as themselves), and the gate opens.
::testing::AssertionResult acknowledgeAndReopen() {
  if (!eventually([] { return gateReason() == "AwaitingAcknowledgement"; }, 30s)) {
    return ::testing::AssertionFailure() << "not awaiting acknowledgement: " << gate() << " (" << gateReason()
                                         << "), findings " << findingCodes();
  }
  const std::string id = failureId();
  if (id.empty()) return ::testing::AssertionFailure() << "no failure id published";
  int rc = 0;
  std::string out = acknowledge("alice@x", acks({{id, "product", "alice@x"}}), &rc);
  if (rc != 0) return ::testing::AssertionFailure() << "alice's ack refused: " << out;
  // One acknowledgement is not enough.
  std::this_thread::sleep_for(1500ms);
  if (gate() != "False") return ::testing::AssertionFailure() << "opened on one acknowledgement";
  out = acknowledge("bob@x", acks({{id, "product", "alice@x"}, {id, "sre", "bob@x"}}), &rc);
  if (rc != 0) return ::testing::AssertionFailure() << "bob's ack refused: " << out;
  if (!eventually([] { return gate() == "True"; }, 30s)) {
    return ::testing::AssertionFailure() << "did not reopen: " << gateReason() << " findings " << findingCodes();
  }
  if (!failureId().empty()) return ::testing::AssertionFailure() << "failure id kept after reopening";
  return ::testing::AssertionSuccess();
}

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream tmp(path.string() + ".tmp");
  tmp << text;
  tmp.close();
  fs::rename(path.string() + ".tmp", path);
}

std::string record(const std::string& id, const std::string& state, const std::string& extra = "") {
  return "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: " + id +
         "\nspec:\n  organization: acme\n  project: \"\"\n  profileId: h200\n  devices: 1\n  state: " + state +
         "\n  requestedAt: \"2026-09-20T09:00:00Z\"\n  startsAt: \"2026-10-01T00:00:00Z\"\n"
         "  addonId: h200-reserved\n  billingReference: OPS-1\n" +
         extra;
}

// Ends every transaction in the ledger the way people do: records are
// canceled or released, never deleted (a record that vanishes from the
// ledger is a finding for as long as the controller remembers it). Each id
// ever committed stays, in one file, in its final state.
std::map<std::string, std::string> endedRecords;  // id -> its final document
void clearLedger() {
  for (const auto& e : fs::directory_iterator(ledgerDir)) {
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto idAt = text.find("  id: ");
    if (idAt == std::string::npos) continue;
    std::string id = text.substr(idAt + 6, text.find('\n', idAt) - idAt - 6);
    if (text.find("state: released") != std::string::npos || text.find("state: canceled") != std::string::npos) {
      endedRecords[id] = text;  // ended already: it stays as it is
      continue;
    }
    const bool releasing = text.find("state: releasing") != std::string::npos;
    endedRecords[id] = releasing ? record(id, "released",
                                          "  approvedBy: {product: pat@x, sre: sam@x}\nstatus:\n  activatedAt: "
                                          "\"2026-10-01T00:00:00Z\"\n  releasedAt: \"2026-11-01T00:00:00Z\"\n"
                                          "  evidenceRevision: ev-2\n")
                                 : record(id, "canceled");
  }
  for (const auto& e : fs::directory_iterator(ledgerDir)) fs::remove_all(e.path());
  for (const auto& [id, text] : endedRecords) writeFile(ledgerDir / (id + ".yaml"), text);
}

class AuditEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "audit-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme", "kube-dc"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("au-", 2, 4));
    applyYaml(gpuClass("h200", kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: billing-plans, namespace: kube-dc}\n"
        "data:\n  plans.yaml: |\n    addons:\n      h200-reserved:\n        selfService: false\n"
        "        gpu:\n          h200: {devices: 1}\n      h200-quota:\n        selfService: true\n"
        "        gpu:\n          h200: {devices: 1}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ledgerDir = fs::temp_directory_path() / ("audit-e2e-ledger-" + std::to_string(::getpid()));
    fs::create_directories(ledgerDir);
    alertmanager = new http::testing::StandIn();
    // KubeVirt permits the pool's host device (the VM door refuses a VMI by the gate alone).
    applyYaml(std::string("apiVersion: v1\nkind: Namespace\nmetadata: {name: kubevirt}\n---\n") +
                  "apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt}\n" +
                  "spec:\n  configuration:\n    permittedHostDevices:\n      pciHostDevices:\n" +
                  "      - {pciVendorSelector: \"10DE:2335\", resourceName: " + kH200 +
                  ", externalResourceProvider: true}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    // A status lagging its spec converges for 10 s (room for the test,
    // playing HNC, to answer on a loaded machine), then it is a failure; a
    // cache not confirmed for 20 s is stale (the informers confirm live
    // caches every 15 s, the ledger source every 5 s).
    replica = new Replica(startReplica(
        "audit-a", kDeviceConfiguration,
        {std::string("--webhook-configurations=") + kClassConfiguration,
         std::string("--webhook-configurations=") + kOrganizationConfiguration,
         std::string("--mutating-webhook-configurations=") + kVmiConfiguration, "--audit-debounce=200ms",
         "--audit-convergence=10s", "--audit-stale-after=20s", "--audit-interval=1h",
         "--ledger-dir=" + ledgerDir.string(), "--ledger-interval=1s", "--billing-plans=kube-dc/billing-plans",
         "--alertmanager-interval=1s", "--alertmanager-url=http://127.0.0.1:" + std::to_string(alertmanager->port()),
         "--release-stuck-after=2s"}));
    applyYaml(shippedWebhooks(kDeviceConfiguration, replica->webhookPort, {{"gpudevices"}, {"gpu-pods", {"acme"}}}),
              &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(shippedWebhooks(kClassConfiguration, replica->webhookPort, {{"gpudeviceclasses"}}), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(shippedWebhooks(kVmiConfiguration, replica->webhookPort, {{"vmis"}}), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "never ready; log: "
        << replica->log;
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    // The caBundle is injected into both configurations.
    ASSERT_TRUE(eventually([] {
      int code = 0;
      std::string out = applyYaml(device("acme", "warmup", "h200", 9), &code);
      return code != 0 && out.find("[CountAboveMax]") != std::string::npos;
    })) << "the API server never called the GPUDevice webhook";
  }
  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    delete alertmanager;
    cluster().down();
    if (!ledgerDir.empty()) fs::remove_all(ledgerDir);
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new AuditEnvironment);

TEST(AuditE2e, TheDashboardShowsThePoolsFigures) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gate() << " " << gateReason();
  std::string table = kubectl("get gpudeviceclasses h200");
  for (const char* column :
       {"MODE", "UNIT", "HEALTHY", "RESERVED", "QUOTA", "SPARE", "HEADROOM", "INVARIANT", "GATE", "REASON"}) {
    EXPECT_NE(table.find(column), std::string::npos) << column << " in\n" << table;
  }
  std::istringstream lines(table);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  std::istringstream cells(row);
  std::vector<std::string> v;
  for (std::string c; cells >> c;) v.push_back(c);
  // NAME ALLOCATION MODE UNIT HEALTHY RESERVED QUOTA SPARE HEADROOM INVARIANT GATE REASON AGE
  ASSERT_GE(v.size(), 13u) << table;
  EXPECT_EQ(v[0], "h200");
  EXPECT_EQ(v[1], "passthrough");
  EXPECT_EQ(v[2], "vm-passthrough");
  EXPECT_EQ(v[3], "devices");
  EXPECT_EQ(v[4], "8");
  EXPECT_EQ(v[5], "0");
  EXPECT_EQ(v[6], "0");
  EXPECT_EQ(v[7], "1");
  EXPECT_EQ(v[8], "7");
  EXPECT_EQ(v[9], "True");
  EXPECT_EQ(v[10], "True");
  EXPECT_EQ(v[11], "Open");
  EXPECT_NE(metricsOf(*replica).find("tally_controller_pool_headroom{pool=\"h200\"} 7"), std::string::npos);
  // A quiet pool is not rewritten: the auditor's own write, node heartbeats
  // and the ledger's reads every second audit it again and change nothing.
  const std::string version = field("{.metadata.resourceVersion}");
  const std::string audited = field("{.status.lastAuditTime}");
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(field("{.metadata.resourceVersion}"), version);
  EXPECT_EQ(field("{.status.lastAuditTime}"), audited);
  const std::string metrics = metricsOf(*replica);
  EXPECT_NE(metrics.find("tally_controller_audits_total"), std::string::npos);
}

TEST(AuditE2e, LedgerFindingsCloseTheGateUntilTwoPeopleAcknowledge) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  writeFile(ledgerDir / "a.yaml", record("gpu-res-1", "pending"));
  writeFile(ledgerDir / "b.yaml", record("gpu-res-1", "pending"));
  writeFile(ledgerDir / "broken.yaml",
            "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\n"
            "metadata:\n  id: gpu-res-x\nspec:\n  profileId: h200\n  devices: many\n");
  ASSERT_TRUE(closedWith("DuplicateReservationId"));
  EXPECT_NE(findingCodes().find("InvalidRecord"), std::string::npos) << findingCodes();
  EXPECT_EQ(gateReason(), "AuditFailed");
  const std::string first = failureId();
  EXPECT_TRUE(first.starts_with("h200-")) << first;
  clearLedger();
  writeFile(ledgerDir / "a.yaml", record("gpu-res-3", "pending"));
  writeFile(ledgerDir / "b.yaml", record("gpu-res-4", "pending"));
  ASSERT_TRUE(closedWith("MultipleTransactions", "DuplicateReservationId"));
  // Another failure: another id, so an acknowledgement of the first cannot reopen it.
  EXPECT_NE(failureId(), first);
  clearLedger();
  ASSERT_TRUE(acknowledgeAndReopen());
}

TEST(AuditE2e, AModeMismatchClosesTheGateAndOneIdentityCannotAckTwice) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  int rc = 0;
  kubectl(
      "label node au-0 kube-dc.com/gpu.expected-workload-mode=vm-passthrough "
      "kube-dc.com/gpu.workload-mode=vm-vgpu --overwrite",
      &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(closedWith("ProfileModeMismatch"));
  kubectl("label node au-0 kube-dc.com/gpu.workload-mode=vm-passthrough --overwrite", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return gateReason() == "AwaitingAcknowledgement"; }, 30s)) << gateReason();
  const std::string id = failureId();
  // Someone else's name, another failure's id, and alice in both roles: refused.
  std::string out = acknowledge("mallory@x", acks({{id, "product", "alice@x"}}), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("AckIdentityMismatch"), std::string::npos) << out;
  out = acknowledge("alice@x", acks({{"h200-00000000-1", "product", "alice@x"}}), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("AckWrongFailure"), std::string::npos) << out;
  out = acknowledge("alice@x", acks({{id, "product", "alice@x"}}), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = acknowledge("alice@x", acks({{id, "product", "alice@x"}, {id, "sre", "alice@x"}}), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("AckTwice"), std::string::npos) << out;
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(gate(), "False");
  ASSERT_TRUE(acknowledgeAndReopen());
}

// The review roles as shipped (manifests/rbac/acknowledgers.yaml), bound to
// users who hold nothing else: product pat, SRE sam and sara.
::testing::AssertionResult bindReviewRoles() {
  int rc = 0;
  std::ifstream in(std::string(TALLY_REPO_DIR) + "/manifests/rbac/acknowledgers.yaml");
  std::string roles((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out = applyYaml(roles, &rc);
  if (rc != 0 || roles.empty()) return ::testing::AssertionFailure() << "the review roles: " << out;
  for (const auto& [binding, role, user] : {std::array<std::string, 3>{"review-pat", "product", "pat@x"},
                                            std::array<std::string, 3>{"review-sam", "sre", "sam@x"},
                                            std::array<std::string, 3>{"review-sara", "sre", "sara@x"}}) {
    out = kubectl("create clusterrolebinding " + binding + " --clusterrole=tally-gate-acknowledger-" + role +
                      " --user=" + user + " 2>&1",
                  &rc);
    if (rc != 0 && out.find("AlreadyExists") == std::string::npos) {
      return ::testing::AssertionFailure() << binding << ": " << out;
    }
  }
  return ::testing::AssertionSuccess();
}

// A merge patch of spec.gateAcknowledgements as `user`, with only the groups
// every authenticated user has.
std::string acknowledgeAsItself(const std::string& user, const std::string& list, int* rc) {
  return kubectl("patch gpudeviceclass h200 --type=merge --as=" + user +
                     " -p '{\"spec\":{\"gateAcknowledgements\":" + list + "}}' 2>&1",
                 rc);
}

TEST(AuditE2e, TwoSresCannotReopenAPoolOnlyProductAndSreTogether) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  ASSERT_TRUE(bindReviewRoles());
  int rc = 0;
  kubectl(
      "label node au-1 kube-dc.com/gpu.expected-workload-mode=vm-passthrough "
      "kube-dc.com/gpu.workload-mode=vm-vgpu --overwrite",
      &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(closedWith("ProfileModeMismatch"));
  kubectl("label node au-1 kube-dc.com/gpu.workload-mode=vm-passthrough --overwrite", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return gateReason() == "AwaitingAcknowledgement"; }, 30s)) << gateReason();
  const std::string id = failureId();
  ASSERT_FALSE(id.empty());

  // SRE sam acknowledges as sre; SRE sara, the second SRE, as product: refused.
  std::string out = acknowledgeAsItself("sam@x", acks({{id, "sre", "sam@x"}}), &rc);
  ASSERT_EQ(rc, 0) << out;
  out = acknowledgeAsItself("sara@x", acks({{id, "sre", "sam@x"}, {id, "product", "sara@x"}}), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[AckRoleNotAuthorised]"), std::string::npos) << out;
  EXPECT_NE(out.find("user sara@x is not authorised for the product role"), std::string::npos) << out;
  // Nor may sam stand for product himself (he is no product person either).
  out = acknowledgeAsItself("sam@x", acks({{id, "sre", "sam@x"}, {id, "product", "sam@x"}}), &rc);
  EXPECT_NE(rc, 0) << out;
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(gate(), "False") << gateReason();
  EXPECT_EQ(field("{.spec.gateAcknowledgements[*].identity}"), "sam@x");

  // Product pat next to sam: one of each role, and the gate reopens.
  out = acknowledgeAsItself("pat@x", acks({{id, "sre", "sam@x"}, {id, "product", "pat@x"}}), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
}

TEST(AuditE2e, AFiringAlertClosesTheGateForNewOrdersOnly) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  int rc = 0;
  applyYaml(device("acme", "held", "h200", 1), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}") == "Bound"; }))
      << "the order was never placed";

  alertmanager->answer("200 OK", R"([{"labels":{"alertname":"GpuXidErrors","gpu_pool":"h200"},)"
                                 R"("status":{"state":"active"}},{"labels":{"alertname":"Other"}}])");
  ASSERT_TRUE(closedWith("ActiveAlert"));
  EXPECT_NE(field("{.status.findings[*].subject}").find("alert/GpuXidErrors"), std::string::npos);
  std::string out = applyYaml(device("acme", "refused", "h200", 1), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[GateClosed]"), std::string::npos) << out;
  EXPECT_EQ(kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}"), "Bound");
  EXPECT_NE(metricsOf(*replica).find("tally_controller_pool_gate_open{pool=\"h200\"} 0"), std::string::npos);

  // Alertmanager unreachable: still closed (stale data never reopens it).
  alertmanager->answer("503 Service Unavailable", "");
  ASSERT_TRUE(eventually(
      [] { return field("{.status.findings[*].subject}").find("alert/alertmanager-unreachable") != std::string::npos; },
      30s))
      << field("{.status.findings[*].subject}");
  EXPECT_EQ(gate(), "False");
  alertmanager->answer("200 OK", "[]");
  ASSERT_TRUE(acknowledgeAndReopen());
  EXPECT_EQ(kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}"), "Bound");

  // Events of the changes on the class.
  std::string events = kubectl(
      "get events -n default --field-selector involvedObject.kind=GPUDeviceClass,involvedObject.name=h200 "
      "-o jsonpath='{.items[*].reason}'");
  EXPECT_NE(events.find("CreationClosed"), std::string::npos) << events;
  EXPECT_NE(events.find("CreationOpened"), std::string::npos) << events;
}

TEST(AuditE2e, AddOnFindingsCloseTheGate) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  int rc = 0;
  auto organization = [&](const std::string& addons) {
    return applyYaml(
        "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata:\n  name: acme\n  namespace: acme\n"
        "  annotations:\n    billing.kube-dc.com/addons: '" +
            addons + "'\n",
        &rc);
  };
  std::string out = organization(R"([{"addonId":"nope","quantity":1}])");
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(closedWith("UnknownAddon"));
  out = organization(R"([{"addonId":"h200-reserved","quantity":1}])");
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(closedWith("MissingLedgerRecord", "UnknownAddon"));
  EXPECT_EQ(findingCodes().find("UnknownAddon"), std::string::npos) << findingCodes();
  out = organization("[]");
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(acknowledgeAndReopen());
}

}  // namespace
}  // namespace tally::runtime::e2e

namespace tally::runtime::e2e {
namespace {

TEST(AuditE2e, AReleaseInFlightFreezesCreationAndIsReportedWhenStuck) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s));
  writeFile(ledgerDir / "releasing.yaml",
            record("gpu-res-7", "releasing",
                   "  approvedBy: {product: pat@x, sre: sam@x}\nstatus:\n  activatedAt: \"2026-10-01T00:00:00Z\"\n"
                   "  evidenceRevision: ev-1\n"));
  // A transaction in flight closes the gate without a failure: no id to acknowledge.
  ASSERT_TRUE(eventually([] { return gateReason() == "TransactionInFlight" || !findingCodes().empty(); }, 30s));
  EXPECT_EQ(gateReason(), "TransactionInFlight") << findingCodes();
  EXPECT_EQ(field("{.status.inFlightTransaction}"), "gpu-res-7");
  EXPECT_EQ(failureId(), "");
  // --release-stuck-after=2s: an Event and a gauge an alert can page on.
  ASSERT_TRUE(eventually(
      [] {
        return metricsOf(*replica).find("tally_controller_release_stuck{pool=\"h200\",record=\"gpu-res-7\"} 1") !=
               std::string::npos;
      },
      30s));
  EXPECT_TRUE(eventually([] {
    return kubectl(
               "get events -n default --field-selector involvedObject.kind=GPUDeviceClass,reason=ReleaseStuck "
               "-o jsonpath='{.items[*].message}'")
               .find("gpu-res-7") != std::string::npos;
  }));
  // The release ends: creation reopens by itself.
  clearLedger();
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  EXPECT_TRUE(eventually([] {
    return metricsOf(*replica).find("tally_controller_release_stuck{pool=\"h200\",record=\"gpu-res-7\"} 0") !=
           std::string::npos;
  }));
}

}  // namespace
}  // namespace tally::runtime::e2e

// --- (e) quota and capacity findings, (g) tallyctl plan live -----------------
//
// The test plays HNC: it reports the HRQ plan-quota's status.hard and
// status.used, as HNC does once it enforces what Tally wrote into spec.hard.

namespace tally::runtime::e2e {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Organization acme's add-on assignments.
std::string assignAddons(const std::string& addons, int* rc) {
  return applyYaml(
      "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata:\n  name: acme\n  namespace: acme\n"
      "  annotations:\n    billing.kube-dc.com/addons: '" +
          addons + "'\n",
      rc);
}
std::string quotaAddon(int quantity) {
  return R"([{"addonId":"h200-quota","quantity":)" + std::to_string(quantity) + "}]";
}

std::string planQuota(const std::string& jsonpath) {
  return kubectl("get hrq -n acme plan-quota -o go-template='" + jsonpath + "'");
}
std::string specHard() { return planQuota("{{index .spec.hard \"" + kKey + "\"}}"); }
std::string organizationHard() {
  return kubectl("get organization -n acme acme -o jsonpath={.status.quotaUsage.accelerators.h200.devices.hard}");
}

// What HNC writes once it enforces the hard quota.
bool hncReports(int hard, int used) {
  int rc = 0;
  kubectl("patch hrq -n acme plan-quota --subresource=status --type=merge -p '{\"status\":{\"hard\":{\"" + kKey +
              "\":\"" + std::to_string(hard) + "\"},\"used\":{\"" + kKey + "\":\"" + std::to_string(used) + "\"}}}'",
          &rc);
  return rc == 0;
}

// acme holds `quantity` of h200-quota: Tally wrote it into plan-quota, HNC
// reports it, Tally wrote the Organization's status from that, the gate is open.
::testing::AssertionResult converged(int quantity) {
  int rc = 0;
  std::string out = assignAddons(quotaAddon(quantity), &rc);
  if (rc != 0) return ::testing::AssertionFailure() << "add-ons not assigned: " << out;
  const std::string want = std::to_string(quantity);
  if (!eventually([&] { return specHard() == want; }, 30s)) {
    return ::testing::AssertionFailure() << "plan-quota hard " << specHard() << ", wanted " << want;
  }
  if (!hncReports(quantity, 1)) return ::testing::AssertionFailure() << "HNC's report not written";
  if (!eventually([&] { return organizationHard() == want && gate() == "True"; }, 30s)) {
    return ::testing::AssertionFailure() << "organization status " << organizationHard() << ", gate " << gate() << " ("
                                         << gateReason() << ") findings " << findingCodes();
  }
  return ::testing::AssertionSuccess();
}

// A new GPUDevice order in the pool; the webhook's answer.
std::string order(const std::string& name, int* rc) { return applyYaml(device("acme", name, "h200", 1), rc); }

std::string rawGpuPod(const std::string& name, const std::string& node = "") {
  return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: acme}\nspec:\n" +
         (node.empty() ? "" : "  nodeName: " + node + "\n") +
         "  tolerations: [{operator: Exists}]\n  containers:\n  - name: c\n    image: trainer\n" +
         "    resources:\n      requests: {" + kH200 + ": 1}\n      limits: {" + kH200 + ": 1}\n";
}

// A VMI starting on the held GPUDevice `held` and one more device from a template.
std::string vmiOn(const std::string& name, const std::string& held) {
  return R"({"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":")" + name +
         R"(","namespace":"acme","annotations":{"gpu.tally.dev/devices":")" + held +
         R"(","gpu.tally.dev/device-templates":"[{\"class\":\"h200\",\"count\":1}]"}},)" +
         R"("spec":{"domain":{"devices":{"disks":[]},"resources":{"requests":{"memory":"1Gi"}}}}})";
}

std::string deviceField(const std::string& name, const std::string& jsonpath) {
  return kubectl("get gpudevice -n acme " + name + " -o jsonpath='" + jsonpath + "'");
}

// HardQuotaAboveCapacity: quota sold on two nodes, one of them cordoned
// (drained for maintenance without a plan): the capacity equation fails.
// Every door refuses new GPU work; what runs keeps running.
TEST(AuditE2e, CapacityLostUnderSoldQuotaClosesEveryDoorAndTouchesNothingRunning) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  int rc = 0;
  kubectl("label namespace acme acme.tree.hnc.x-k8s.io/depth=0 --overwrite", &rc);
  ASSERT_EQ(rc, 0);
  // 8 healthy devices >= 0 reserved + 6 quota + 1 spare: headroom 1.
  ASSERT_TRUE(converged(6));
  ASSERT_TRUE(eventually([] { return field("{.status.headroom}") == "1"; })) << field("{.status.headroom}");
  ASSERT_EQ(deviceField("held", "{.status.phase}"), "Bound");
  const std::string heldNode = deviceField("held", "{.status.node}");
  // A raw GPU pod admitted while the gate is open, running on au-0.
  std::string out = applyYaml(rawGpuPod("running", "au-0"), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return kubectl("get pod -n acme running -o jsonpath={.status.phase}") == "Running"; }))
      << kubectl("get pod -n acme running -o yaml");
  const std::string podUid = kubectl("get pod -n acme running -o jsonpath={.metadata.uid}");

  kubectl("cordon au-1", &rc);
  ASSERT_EQ(rc, 0);
  const auto cordoned = Clock::now();
  ASSERT_TRUE(closedWith("HardQuotaAboveCapacity"));
  const double closeSeconds = secondsSince(cordoned);
  EXPECT_EQ(gateReason(), "AuditFailed");
  EXPECT_FALSE(failureId().empty());
  const std::string messages = field("{.status.findings[*].message}");
  EXPECT_NE(messages.find("healthy 4 >= reserved 0 + non-reserved hard quota 6 + spare 1 (headroom -3)"),
            std::string::npos)
      << messages;
  EXPECT_EQ(field("{.status.conditions[?(@.type==\"InvariantHolds\")].status}"), "False");

  // The doors: a GPUDevice order, a raw GPU pod, a VMI (on the held device).
  const std::string refusedOrder = order("after-cordon", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(refusedOrder.find("[GateClosed]"), std::string::npos) << refusedOrder;
  const std::string refusedPod = applyYaml(rawGpuPod("after-cordon"), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(refusedPod.find("[GateClosed]"), std::string::npos) << refusedPod;
  std::string refusedVmi;
  EXPECT_TRUE(eventually(
      [&] {
        refusedVmi = applyYaml(vmiOn("vm-after-cordon", "held"), &rc);
        return rc != 0 && refusedVmi.find("[GateClosed]") != std::string::npos;
      },
      20s))
      << refusedVmi;
  EXPECT_EQ(refusedVmi.find("[NotPermitted]"), std::string::npos) << refusedVmi;
  // The Organization door ("disable new grants"), registered for this test only
  // (the others write add-ons the door would refuse, to see the audit's findings).
  applyYaml(shippedWebhooks(kOrganizationConfiguration, replica->webhookPort, {{"organizations"}}), &rc);
  ASSERT_EQ(rc, 0);
  std::string refusedGrant;
  EXPECT_TRUE(eventually(
      [&] {
        refusedGrant = assignAddons(quotaAddon(7), &rc);
        return rc != 0 && refusedGrant.find("[GateClosed]") != std::string::npos;
      },
      20s))
      << refusedGrant;
  EXPECT_NE(refusedGrant.find("no new grants"), std::string::npos) << refusedGrant;
  EXPECT_EQ(specHard(), "6");
  kubectl(std::string("delete validatingwebhookconfiguration ") + kOrganizationConfiguration, &rc);
  EXPECT_EQ(kubectl("get gpudevice -n acme after-cordon --ignore-not-found -o name"), "");
  EXPECT_EQ(kubectl("get vmi -n acme -o name"), "");
  std::printf(
      "HardQuotaAboveCapacity: closed %.1f s after the cordon, failure %s\n  order: %s  pod: %s  vmi: %s  grant: %s",
      closeSeconds, failureId().c_str(), refusedOrder.c_str(), refusedPod.c_str(), refusedVmi.c_str(),
      refusedGrant.c_str());
  // Nothing running is touched.
  EXPECT_EQ(deviceField("held", "{.status.phase}"), "Bound");
  EXPECT_EQ(deviceField("held", "{.status.node}"), heldNode);
  EXPECT_TRUE(deviceField("held", "{.status.attachedTo}").empty());
  EXPECT_EQ(kubectl("get pod -n acme running -o jsonpath={.metadata.uid}/{.spec.nodeName}/{.status.phase}"),
            podUid + "/au-0/Running");

  kubectl("uncordon au-1", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(acknowledgeAndReopen());
  EXPECT_EQ(kubectl("get pod -n acme running -o jsonpath={.metadata.uid}/{.spec.nodeName}"), podUid + "/au-0");
  EXPECT_EQ(deviceField("held", "{.status.phase}"), "Bound");
  kubectl("delete pod -n acme running --grace-period=0 --force", &rc);
}

// StatusDisagreement: the add-on grows, Tally rewrites plan-quota, HNC does
// not report it. Within --audit-convergence the gate is closed as converging
// (no failure to acknowledge); beyond it the lag is an audit failure. The
// Organization's status (written from what HNC reports) disagrees with the
// HRQ too: its own finding.
TEST(AuditE2e, HncLaggingBeyondTheConvergenceBoundIsAFailure) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  ASSERT_TRUE(converged(3));
  int rc = 0;
  std::string out = assignAddons(quotaAddon(4), &rc);
  ASSERT_EQ(rc, 0) << out;
  const auto grown = Clock::now();
  ASSERT_TRUE(eventually([] { return gate() == "False"; }, 30s)) << gateReason();
  const double closeSeconds = secondsSince(grown);
  // First converging: closed, no failure id.
  EXPECT_EQ(gateReason(), "Converging") << findingCodes();
  EXPECT_EQ(failureId(), "");
  EXPECT_NE(findingCodes().find("StatusDisagreement"), std::string::npos) << findingCodes();
  const std::string whileConverging = order("while-converging", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(whileConverging.find("[GateClosed]"), std::string::npos) << whileConverging;
  // Beyond the bound: a failure with an id.
  ASSERT_TRUE(eventually([] { return gateReason() == "AuditFailed"; }, 30s)) << gateReason() << " " << findingCodes();
  const double failSeconds = secondsSince(grown);
  const std::string id = failureId();
  EXPECT_TRUE(id.starts_with("h200-")) << id;
  const std::string subjects = field("{.status.findings[*].subject}");
  EXPECT_NE(subjects.find("hrq/acme/plan-quota/status"), std::string::npos) << subjects;
  EXPECT_NE(subjects.find("organization/acme/status"), std::string::npos) << subjects;
  const std::string messages = field("{.status.findings[*].message}");
  EXPECT_NE(messages.find("has spec.hard 4 " + kKey + " but status.hard 3"), std::string::npos) << messages;
  EXPECT_NE(messages.find("organization acme status reports hard 3 for h200 but HRQ acme/plan-quota has 4"),
            std::string::npos)
      << messages;
  const std::string afterBound = order("after-bound", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(afterBound.find("[GateClosed]"), std::string::npos) << afterBound;
  EXPECT_NE(afterBound.find(id), std::string::npos) << afterBound;
  std::printf(
      "StatusDisagreement: closed (Converging) %.1f s after the add-on grew, AuditFailed %.1f s after "
      "(--audit-convergence=10s), failure %s\n  converging: %s  failed: %s",
      closeSeconds, failSeconds, id.c_str(), whileConverging.c_str(), afterBound.c_str());
  EXPECT_EQ(deviceField("held", "{.status.phase}"), "Bound");

  // HNC catches up; Tally writes the Organization's status from it.
  ASSERT_TRUE(hncReports(4, 1));
  ASSERT_TRUE(eventually([] { return organizationHard() == "4"; }, 30s)) << organizationHard();
  ASSERT_TRUE(acknowledgeAndReopen());
}

// A status lag the convergence bound covers reopens by itself: nothing to acknowledge.
TEST(AuditE2e, HncCatchingUpWithinTheBoundReopensByItself) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  ASSERT_TRUE(converged(4));
  int rc = 0;
  std::string out = assignAddons(quotaAddon(3), &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] { return specHard() == "3"; }, 30s)) << specHard();
  ASSERT_TRUE(eventually([] { return gateReason() == "Converging"; }, 30s)) << gateReason() << " " << findingCodes();
  ASSERT_TRUE(hncReports(3, 1));
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  EXPECT_EQ(failureId(), "");
}

// StaleCapacity: the ledger's directory vanishes (its volume lost, git-sync
// gone): at once the ledger cannot be read; once it has not been confirmed
// for --audit-stale-after, what it reserves is stale.
TEST(AuditE2e, ALedgerThatCannotBeReadBecomesStale) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  const fs::path away = ledgerDir.string() + ".away";
  fs::rename(ledgerDir, away);
  const auto lost = Clock::now();
  ASSERT_TRUE(closedWith("InvalidRecord"));
  const double unreadableSeconds = secondsSince(lost);
  EXPECT_EQ(findingCodes().find("StaleCapacity"), std::string::npos) << "stale before the bound";
  ASSERT_TRUE(eventually([] { return findingCodes().find("StaleCapacity") != std::string::npos; }, 40s))
      << findingCodes();
  const double staleSeconds = secondsSince(lost);
  EXPECT_EQ(gate(), "False");
  EXPECT_EQ(gateReason(), "AuditFailed");
  const std::string subjects = field("{.status.findings[*].subject}");
  EXPECT_NE(subjects.find("cache/Ledger"), std::string::npos) << subjects;
  const std::string messages = field("{.status.findings[*].message}");
  EXPECT_NE(messages.find("the Ledger cache was last confirmed"), std::string::npos) << messages;
  EXPECT_NE(messages.find("(bound 20s)"), std::string::npos) << messages;
  int rc = 0;
  const std::string refused = order("ledger-stale", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(refused.find("[GateClosed]"), std::string::npos) << refused;
  std::printf("StaleCapacity: InvalidRecord (unreadable) %.1f s, StaleCapacity %.1f s after the ledger vanished\n  %s",
              unreadableSeconds, staleSeconds, refused.c_str());
  EXPECT_EQ(deviceField("held", "{.status.phase}"), "Bound");
  fs::rename(away, ledgerDir);
  ASSERT_TRUE(acknowledgeAndReopen());
}

struct PlanFigures {
  std::int64_t devices = -1, units = -1, reserved = -1, quota = -1, spare = -1, headroom = -99;
  std::string equation;
};

// The first pool of `side` ("before" or "after") of `tallyctl plan -o json`.
std::optional<PlanFigures> planFigures(const std::string& json, const char* side) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc, pool;
  if (parser.parse(json).get(doc) || doc[side].at(0).get(pool)) return std::nullopt;
  PlanFigures f;
  std::int64_t perDevice = 0;
  std::string_view equation;
  if (pool["unitsPerDevice"].get(perDevice) || perDevice <= 0 || pool["healthySchedulableDevices"].get(f.devices) ||
      pool["terms"]["healthy"]["units"].get(f.units) || pool["terms"]["reserved"]["units"].get(f.reserved) ||
      pool["terms"]["nonReservedHard"]["units"].get(f.quota) || pool["terms"]["spare"]["units"].get(f.spare) ||
      pool["headroom"].get(f.headroom) || pool["equation"].get(equation)) {
    return std::nullopt;
  }
  f.reserved /= perDevice;
  f.spare /= perDevice;
  f.equation = std::string(equation);
  return f;
}

PlanFigures published() {
  PlanFigures f;
  auto number = [](const std::string& name) {
    const std::string v = field("{.status." + name + "}");
    return v.empty() ? -1 : std::stoll(v);
  };
  f.devices = number("healthySchedulableDevices");
  f.units = number("healthySchedulableUnits");
  f.reserved = number("reservedDevices");
  f.quota = number("nonReservedHardQuota");
  f.spare = number("spareDevices");
  f.headroom = number("headroom");
  f.equation = field("{.status.conditions[?(@.type==\"InvariantHolds\")].message}");
  return f;
}

::testing::AssertionResult sameFigures(const PlanFigures& plan, const PlanFigures& status) {
  if (plan.devices == status.devices && plan.units == status.units && plan.reserved == status.reserved &&
      plan.quota == status.quota && plan.spare == status.spare && plan.headroom == status.headroom &&
      plan.equation == status.equation) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "tallyctl plan: devices " << plan.devices << " units " << plan.units
                                       << " reserved " << plan.reserved << " quota " << plan.quota << " spare "
                                       << plan.spare << " headroom " << plan.headroom << " (" << plan.equation
                                       << ")\nclass status: devices " << status.devices << " units " << status.units
                                       << " reserved " << status.reserved << " quota " << status.quota << " spare "
                                       << status.spare << " headroom " << status.headroom << " (" << status.equation
                                       << ")";
}

std::string tallyctlPlan(const std::string& change, int* rc) {
  return runCommand(std::string(TALLYCTL_BINARY) + " plan --kubeconfig " + cluster().kubeconfig() + " --ledger " +
                        ledgerDir.string() + " " + change + " 2>/dev/null",
                    rc);
}

// (g) `tallyctl plan` against the live cluster starts from the figures the
// auditor publishes on the class (one model, one equation): with a pending
// reservation holding a device, and once it is canceled.
TEST(AuditE2e, TallyctlPlanLiveStartsFromTheFiguresTheAuditorPublishes) {
  ASSERT_TRUE(eventually([] { return gate() == "True"; }, 30s)) << gateReason() << " " << findingCodes();
  ASSERT_TRUE(converged(2));
  writeFile(ledgerDir / "gpu-res-9.yaml", record("gpu-res-9", "pending"));
  ASSERT_TRUE(eventually(
      [] { return gateReason() == "TransactionInFlight" && field("{.status.reservedDevices}") == "1"; }, 30s))
      << gateReason() << " " << findingCodes();
  for (int round = 0; round < 2; ++round) {
    int rc = 0;
    const std::string json = tallyctlPlan("--addon acme/h200-quota=3 -o json", &rc);
    auto before = planFigures(json, "before");
    auto after = planFigures(json, "after");
    ASSERT_TRUE(before && after) << json;
    const PlanFigures status = published();
    EXPECT_TRUE(sameFigures(*before, status)) << json;
    EXPECT_EQ(status.devices, 8);
    EXPECT_EQ(status.reserved, round == 0 ? 1 : 0);
    EXPECT_EQ(status.quota, 2);
    EXPECT_EQ(status.spare, 1);
    // One more add-on: one more unit of quota, one less of headroom.
    EXPECT_EQ(after->quota, before->quota + 1);
    EXPECT_EQ(after->headroom, before->headroom - 1);
    const std::string text = tallyctlPlan("--addon acme/h200-quota=3", &rc);
    EXPECT_NE(text.find("before  " + status.equation + "\n"), std::string::npos) << text << "\n" << status.equation;
    std::printf("round %d: class status %s; tallyctl plan:\n%s", round, status.equation.c_str(), text.c_str());
    if (round == 0) {
      // The transaction ends (canceled): creation reopens by itself.
      clearLedger();
      ASSERT_TRUE(eventually([] { return gate() == "True" && field("{.status.reservedDevices}") == "0"; }, 30s))
          << gateReason() << " " << findingCodes();
    }
  }
  ASSERT_TRUE(converged(0));
}

}  // namespace
}  // namespace tally::runtime::e2e
