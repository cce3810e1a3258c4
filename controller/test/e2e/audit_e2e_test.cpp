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
// Events record each change.

#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDeviceConfiguration = "tally-audit-e2e";
constexpr const char* kClassConfiguration = "tally-audit-class-e2e";

// A stand-in Alertmanager: answers every request with the body set last.
class AlertmanagerStandIn {
 public:
  AlertmanagerStandIn() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      for (;;) {
        boost::asio::ip::tcp::socket socket(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec || stopping_) return;
        boost::asio::streambuf request;
        boost::asio::read_until(socket, request, "\r\n\r\n", ec);
        std::string status, body;
        {
          std::lock_guard lock(mu_);
          status = status_;
          body = body_;
        }
        std::string answer = "HTTP/1.1 " + status +
                             "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
        boost::asio::write(socket, boost::asio::buffer(answer), ec);
      }
    });
  }
  ~AlertmanagerStandIn() {
    stopping_ = true;
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  void answer(std::string status, std::string body) {
    std::lock_guard lock(mu_);
    status_ = std::move(status);
    body_ = std::move(body);
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::string status_ = "200 OK", body_ = "[]";
  std::thread thread_;
};

AlertmanagerStandIn* alertmanager = nullptr;
Replica* replica = nullptr;
fs::path ledgerDir;

std::string classWebhookConfiguration(std::uint16_t port) {
  return std::string("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n") +
         "metadata: {name: " + kClassConfiguration + "}\nwebhooks:\n- name: gpudeviceclasses.gpu.tally.dev\n" +
         "  clientConfig: {url: \"https://127.0.0.1:" + std::to_string(port) + "/validate/gpudeviceclasses\"}\n" +
         "  rules:\n  - apiGroups: [gpu.tally.dev]\n    apiVersions: [v1alpha1]\n" +
         "    operations: [UPDATE]\n    resources: [gpudeviceclasses]\n    scope: Cluster\n" +
         "  matchConditions:\n  - name: acknowledgements-changed\n    expression: >-\n" +
         "      (has(object.spec.gateAcknowledgements) ? object.spec.gateAcknowledgements : []) !=\n" +
         "      (has(oldObject.spec.gateAcknowledgements) ? oldObject.spec.gateAcknowledgements : [])\n" +
         "  failurePolicy: Fail\n  sideEffects: NoneOnDryRun\n  timeoutSeconds: 5\n" +
         "  admissionReviewVersions: [v1]\n";
}

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
        "        gpu:\n          h200: {devices: 1}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ledgerDir = fs::temp_directory_path() / ("audit-e2e-ledger-" + std::to_string(::getpid()));
    fs::create_directories(ledgerDir);
    alertmanager = new AlertmanagerStandIn();
    replica = new Replica(startReplica(
        "audit-a", kDeviceConfiguration,
        {std::string("--webhook-configurations=") + kClassConfiguration, "--audit-debounce=200ms",
         "--audit-interval=1h", "--ledger-dir=" + ledgerDir.string(), "--ledger-interval=1s",
         "--billing-plans=kube-dc/billing-plans", "--alertmanager-interval=1s",
         "--alertmanager-url=http://127.0.0.1:" + std::to_string(alertmanager->port()), "--release-stuck-after=2s"}));
    applyYaml(webhookConfiguration(kDeviceConfiguration, replica->webhookPort), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(classWebhookConfiguration(replica->webhookPort), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "never ready; log: "
        << replica->log;
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
