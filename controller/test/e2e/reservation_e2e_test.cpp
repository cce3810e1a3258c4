// The runbook's two procedures end to end, as operators run them, against a
// real kube-apiserver calling two replicas of the real tally-controller over
// HTTPS. The test plays HNC (it copies each HRQ's spec.hard into status.hard
// and writes status.used from the holders it created) and plays the people
// who commit ledger records (files in the ledger directory) and assign
// add-ons (the Organization annotation). Tally does the rest by itself:
// plan-quota, Organization status, the pool's dashboard and creation gate,
// billing windows.
//
// (c) assignment: pending record -> gate closed while the transaction is in
//     flight -> add-on assigned -> HRQ and Organization status converge ->
//     record active -> gate reopens, invariant holds, billing from activatedAt;
// (d) release: releasing -> capacity kept while a holder remains, the add-on
//     removal refused naming it -> holder gone -> removal accepted, HRQ
//     shrinks -> released -> gate reopens, billing stops at releasedAt;
// (f) the leader is killed during each procedure: the standby finishes it,
//     with the same end state, and usage is neither lost nor doubled.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kValidating = "tally-e2e-gpudevices,tally-e2e-organizations";
constexpr const char* kPool = "h200";
const std::string kKey = std::string("requests.") + kH200;

std::filesystem::path ledgerDir;
Replica replicas[2];
std::atomic<bool> hncRunning{false};
std::thread hncThread;
std::mutex usedMu;
std::string hncUsed = "0";  // status.used of acme's plan-quota, as HNC would count the holders

std::string jsonpath(const std::string& what, const std::string& path) {
  return kubectl("get " + what + " -o jsonpath='" + path + "'");
}
std::string condition(const std::string& type) {
  return jsonpath(std::string("gpudeviceclass ") + kPool, "{.status.conditions[?(@.type==\"" + type + "\")].status}");
}
std::string classStatus(const std::string& field) {
  return jsonpath(std::string("gpudeviceclass ") + kPool, "{.status." + field + "}");
}
std::string planQuotaHard() {
  return jsonpath("hrq -n acme plan-quota",
                  "{.spec.hard." + std::string("requests\\.nvidia\\.com/GH100_H200_SXM_141GB") + "}");
}
std::string orgStatusDevicesHard() {
  return jsonpath("organization -n acme acme",
                  std::string("{.status.quotaUsage.accelerators.") + kPool + ".devices.hard}");
}

// HNC's part: status.hard follows spec.hard, status.used is what the test holds.
void playHnc() {
  while (hncRunning) {
    std::string hard = kubectl("get hrq -n acme plan-quota -o jsonpath='{.spec.hard}'");
    if (!hard.empty() && hard.front() == '{') {
      std::string used;
      {
        std::lock_guard lock(usedMu);
        used = hncUsed;
      }
      kubectl("patch hrq -n acme plan-quota --subresource=status --type=merge -p '{\"status\":{\"hard\":" + hard +
              ",\"used\":{\"" + kKey + "\":\"" + used + "\"}}}'");
    }
    std::this_thread::sleep_for(300ms);
  }
}
void holdersUsed(int n) {
  std::lock_guard lock(usedMu);
  hncUsed = std::to_string(n);
}

std::string record(const std::string& state, const std::string& status) {
  return "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: gpu-res-e2e-1\n"
         "spec:\n  organization: acme\n  project: \"\"\n  profileId: h200\n  devices: 2\n  state: " +
         state +
         "\n  requestedAt: \"2026-11-30T09:00:00Z\"\n  startsAt: \"2026-12-01T00:00:00Z\"\n  endsAt: \"\"\n"
         "  addonId: gpu-h200-reserved\n  billingReference: OPS-E2E-1\n  approvedBy:\n    product: "
         "product@example.com\n    sre: sre@example.com\nstatus:\n" +
         status + "  evidenceRevision: evidence-1\n  reason: e2e\n";
}
void commit(const std::string& yaml) {
  // As git-sync does: the new revision appears whole (write, then rename).
  auto tmp = ledgerDir / ".gpu-res-e2e-1.yaml.tmp";
  std::ofstream(tmp) << yaml;
  std::filesystem::rename(tmp, ledgerDir / "gpu-res-e2e-1.yaml");
}
std::string rfc3339Now();
std::string addons(int dedicated, int reserved) {
  std::string a = "[{\"addonId\":\"gpu-h200-dedicated\",\"quantity\":" + std::to_string(dedicated) + "}";
  if (reserved > 0) a += ",{\"addonId\":\"gpu-h200-reserved\",\"quantity\":" + std::to_string(reserved) + "}";
  return a + "]";
}
std::string assignAddons(const std::string& value, int* rc) {
  return kubectl("annotate --overwrite organization -n acme acme 'billing.kube-dc.com/addons=" + value + "'", rc);
}
// A CREATE of Organization globex with these add-ons.
std::string createGlobex(const std::string& value, int* rc) {
  return applyYaml(
      "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata:\n  name: globex\n  namespace: globex\n"
      "  annotations:\n    billing.kube-dc.com/addons: '" +
          value + "'\nspec: {}\n",
      rc);
}
std::vector<std::string> replicaArgs;

int leaderIndex() {
  std::string holder = leaseHolder();
  for (int i = 0; i < 2; ++i) {
    if (replicas[i].identity == holder) return i;
  }
  return -1;
}
// Both replicas behind one address, which both webhook configurations name
// from the start: when the leader dies no URL changes.
ReplicaService service;

// Kills the leader (SIGKILL) and returns its index, without waiting.
int killLeaderNow() {
  const int i = leaderIndex();
  if (i >= 0) stopReplica(replicas[i], SIGKILL);
  return i;
}
// The standby takes the Lease; the killed one starts again as the new
// standby (the Deployment's replacement, joining the Service), so two
// replicas run on.
void replaceKilled(int i, std::string identity) {  // a copy: replicas[i] is replaced
  ASSERT_TRUE(eventually([&] { return !leaseHolder().empty() && leaseHolder() != identity; }, 30s))
      << "the standby never took the Lease";
  replicas[i] = startReplica(identity, kValidating, replicaArgs);
  ASSERT_GT(replicas[i].pid, 0);
  service.endpoints({&replicas[0], &replicas[1]});
}
void killLeader() {
  const int i = killLeaderNow();
  ASSERT_GE(i, 0) << "no replica holds the Lease";
  replaceKilled(i, replicas[i].identity);
}

std::string rfc3339(std::time_t t) {
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}
// The last and the next hour: the recorder reads one ConfigMap per day of the period.
std::string usageOf(const Replica& r) {
  const std::time_t now = std::time(nullptr);
  return runCommand("curl -s --max-time 5 " + adminBearer() + " 'http://127.0.0.1:" + std::to_string(r.opsPort) +
                    "/usage?since=" + rfc3339(now - 3600) + "&until=" + rfc3339(now + 3600) + "'");
}
// The usage export's line that names `needle`.
std::string usageLine(const std::string& needle) {
  int i = leaderIndex();
  if (i < 0) return "";
  std::string all = usageOf(replicas[i]);
  std::size_t at = all.find(needle);
  if (at == std::string::npos) return "";
  std::size_t begin = all.rfind('\n', at);
  std::size_t end = all.find('\n', at);
  return all.substr(begin == std::string::npos ? 0 : begin + 1,
                    end == std::string::npos ? std::string::npos : end - begin - 1);
}

// Every usage line naming `needle`: a holder's usage comes in one line per
// UTC hour, so a test running across the hour reads two.
std::vector<std::string> usageLines(const std::string& needle) {
  std::vector<std::string> out;
  int i = leaderIndex();
  if (i < 0) return out;
  std::istringstream all(usageOf(replicas[i]));
  for (std::string line; std::getline(all, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string rfc3339Now() { return rfc3339(std::time(nullptr)); }

bool gateIs(const std::string& status) { return condition("CreationOpen") == status; }

void expectOrderRefused(const std::string& name, const std::string& code) {
  int rc = 0;
  std::string out = applyYaml(device("acme", name, kPool, 1), &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("[" + code + "]"), std::string::npos) << out;
}

class ReservationEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "res-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "kube-dc", "acme", "globex"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0);
    }
    // 2 nodes x 4 H200 = 8 devices, spare 1 by default.
    ASSERT_TRUE(gpuNodes("res-gpu-", 2, 4));
    applyYaml(gpuClass(kPool, kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: billing-plans, namespace: kube-dc}\n") +
                  "data:\n  plans.yaml: |\n    addons:\n      gpu-h200-dedicated:\n        selfService: true\n" +
                  "        gpu: {h200: {devices: 1}}\n      gpu-h200-reserved:\n        selfService: false\n" +
                  "        gpu: {h200: {devices: 1}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(
        "apiVersion: kube-dc.com/v1\nkind: Organization\nmetadata:\n  name: acme\n  namespace: acme\n"
        "  annotations:\n    billing.kube-dc.com/addons: '" +
            addons(2, 0) + "'\nspec: {}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ledgerDir = std::filesystem::temp_directory_path() / ("res-e2e-ledger-" + std::to_string(::getpid()));
    std::filesystem::create_directories(ledgerDir);

    replicaArgs = {"--ledger-dir=" + ledgerDir.string(), "--ledger-interval=300ms", "--audit-interval=1h",
                   "--usage-interval=1s"};
    replicas[0] = startReplica("res-a", kValidating, replicaArgs);
    ASSERT_GT(replicas[0].pid, 0);
    ASSERT_TRUE(eventually([] { return leaseHolder() == "res-a"; })) << "res-a never took the Lease";
    replicas[1] = startReplica("res-b", kValidating, replicaArgs);
    ASSERT_GT(replicas[1].pid, 0);
    ASSERT_TRUE(service.start({&replicas[0], &replicas[1]})) << "the proxy in front of both replicas did not start";
    applyYaml(shippedWebhooks("tally-e2e-gpudevices", service.port(), {{"gpudevices"}}), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(shippedWebhooks("tally-e2e-organizations", service.port(), {{"organizations"}}), &rc);
    ASSERT_EQ(rc, 0);
    for (Replica& r : replicas) {
      ASSERT_TRUE(eventually([&r] {
        return httpStatus("http://127.0.0.1:" + std::to_string(r.opsPort) + "/readyz") == 200;
      })) << r.identity
          << " never became ready; log: " << r.log;
    }
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    hncRunning = true;
    hncThread = std::thread(playHnc);
  }

  void TearDown() override {
    hncRunning = false;
    if (hncThread.joinable()) hncThread.join();
    for (Replica& r : replicas) stopReplica(r, SIGTERM);
    service.stop();
    cluster().down();
    std::filesystem::remove_all(ledgerDir);
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ReservationEnvironment);

const std::string kNoTimes = "  activatedAt: \"\"\n  releasedAt: \"\"\n";
std::string activatedAt, releasedAt;

TEST(Reservation, AssignmentProcedureConvergesWithTheGateClosedDuringTheTransaction) {
  // Before: 2 dedicated H200 for acme; 8 >= 0 + 2 + 1.
  ASSERT_TRUE(eventually([] { return planQuotaHard() == "2"; })) << "plan-quota: " << planQuotaHard();
  ASSERT_TRUE(eventually([] { return orgStatusDevicesHard() == "2"; })) << "Organization status never converged";
  ASSERT_TRUE(eventually([] { return gateIs("True") && condition("InvariantHolds") == "True"; }))
      << kubectl(std::string("get gpudeviceclass ") + kPool + " -o yaml");
  EXPECT_EQ(classStatus("healthySchedulableDevices"), "8");
  EXPECT_EQ(classStatus("nonReservedHardQuota"), "2");
  EXPECT_EQ(classStatus("spareDevices"), "1");

  // 4. Commit a pending ledger record first: creation freezes in the pool.
  commit(record("pending", kNoTimes));
  ASSERT_TRUE(eventually([] { return gateIs("False") && classStatus("inFlightTransaction") == "gpu-res-e2e-1"; }))
      << kubectl(std::string("get gpudeviceclass ") + kPool + " -o yaml");
  EXPECT_EQ(classStatus("reservedDevices"), "2");
  EXPECT_EQ(condition("InvariantHolds"), "True");  // 8 >= 2 + 2 + 1
  expectOrderRefused("during-transaction", "GateClosed");
  // The Organization door in the same moment: a grant other than the record's
  // own (one more dedicated device) is refused while the transaction is open.
  {
    int rc = 0;
    const std::string out = assignAddons(addons(3, 0), &rc);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("[TransactionInFlight]"), std::string::npos) << out;
    EXPECT_NE(out.find("gpu-res-e2e-1"), std::string::npos) << out;
    // An Organization created with a grant in the pool is the same second transaction.
    const std::string created = createGlobex(R"([{"addonId":"gpu-h200-dedicated","quantity":1}])", &rc);
    EXPECT_NE(rc, 0) << created;
    EXPECT_NE(created.find("[TransactionInFlight]"), std::string::npos) << created;
    EXPECT_EQ(kubectl("get organization -n globex --ignore-not-found -o name"), "");
  }

  // (f) the leader dies in the middle of the transaction, and 4.1 (assign
  // the exact operator-only add-on) is sent at once, through the one address
  // and nothing re-pointed: the standby answers while the Lease is still the
  // dead leader's. A create the dead leader's broken connection failed is
  // counted and sent again, as the operator would.
  const int killed = killLeaderNow();
  ASSERT_GE(killed, 0) << "no replica holds the Lease";
  const std::string killedIdentity = replicas[killed].identity;  // kept by stopReplica
  const auto killedAt = std::chrono::steady_clock::now();
  int rc = 0, failed = 0;
  std::string out;
  for (int attempt = 0; attempt < 20; ++attempt) {
    out = assignAddons(addons(2, 2), &rc);
    if (rc == 0) break;
    ASSERT_EQ(out.find("denied the request"), std::string::npos) << "the record's own grant was refused: " << out;
    ++failed;
    std::printf("  the assignment failed (attempt %d): %s", attempt + 1, out.c_str());
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(rc, 0) << out;
  const double answered = std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
  std::printf("leader %s killed in the transaction: the assignment admitted %.2f s later, %d attempts failed\n",
              killedIdentity.c_str(), answered, failed);
  EXPECT_EQ(failed, 0) << "admissions failed after the leader died behind the one address";
  replaceKilled(killed, killedIdentity);
  std::printf("the standby %s took the Lease %.1f s after the kill\n", leaseHolder().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count());

  // 4.2 HRQ and status converge, written by the new leader.
  ASSERT_TRUE(eventually([] { return planQuotaHard() == "4"; })) << "plan-quota: " << planQuotaHard();
  ASSERT_TRUE(eventually([] { return orgStatusDevicesHard() == "4"; }));
  ASSERT_TRUE(eventually([] { return classStatus("nonReservedHardQuota") == "2"; }));  // 4 hard - 2 reserved
  EXPECT_TRUE(gateIs("False"));                                                        // still pending

  // 4.6 commit active with its activation time: the gate reopens by itself.
  activatedAt = rfc3339Now();
  commit(record("active", "  activatedAt: \"" + activatedAt + "\"\n  releasedAt: \"\"\n"));
  ASSERT_TRUE(eventually([] { return gateIs("True") && classStatus("inFlightTransaction").empty(); }))
      << kubectl(std::string("get gpudeviceclass ") + kPool + " -o yaml");
  EXPECT_EQ(condition("InvariantHolds"), "True");
  EXPECT_EQ(classStatus("reservedDevices"), "2");
  // Billing starts at activatedAt, never at the request or the pending record.
  ASSERT_TRUE(eventually([] { return !usageLine("gpu-res-e2e-1").empty(); })) << usageOf(replicas[0]);
  std::string window = usageLine("gpu-res-e2e-1");
  EXPECT_NE(window.find(activatedAt), std::string::npos) << window;
  EXPECT_EQ(window.find("2026-11-30T09:00:00Z"), std::string::npos) << window;
}

TEST(Reservation, ReleaseKeepsCapacityWhileAHolderRemainsAndBillingStopsAtReleasedAt) {
  ASSERT_FALSE(activatedAt.empty()) << "runs after the assignment procedure";
  int rc = 0;
  std::string out;
  // The add-on of an active record stays until the record is releasing, even
  // with nothing in use: the removal is refused naming the record and the release.
  ASSERT_TRUE(eventually([&] {
    out = assignAddons(addons(2, 0), &rc);
    return rc != 0 && out.find("gpu-res-e2e-1") != std::string::npos;
  })) << out;
  EXPECT_NE(out.find("[AddonReductionBlocked]"), std::string::npos) << out;
  EXPECT_NE(out.find("releasing"), std::string::npos) << out;
  EXPECT_EQ(planQuotaHard(), "4");
  // A holder of acme: 3 devices, more than the dedicated add-on alone grants.
  ASSERT_TRUE(eventually([&] {
    out = applyYaml(device("acme", "holder", kPool, 3), &rc);
    return rc == 0;
  })) << out;
  ASSERT_TRUE(eventually([] { return jsonpath("gpudevice -n acme holder", "{.status.phase}") == "Bound"; }));
  holdersUsed(3);
  auto heldSince = std::chrono::steady_clock::now();
  // Long enough that a count lost or doubled across the leader change below
  // falls outside the tolerance.
  std::this_thread::sleep_for(15s);

  // 1. releasing: creation closes, the capacity stays held.
  commit(record("releasing", "  activatedAt: \"" + activatedAt + "\"\n  releasedAt: \"\"\n"));
  ASSERT_TRUE(eventually([] { return gateIs("False") && classStatus("inFlightTransaction") == "gpu-res-e2e-1"; }));
  EXPECT_EQ(classStatus("reservedDevices"), "2");
  EXPECT_EQ(condition("InvariantHolds"), "True");

  killLeader();

  // 4. the removal is refused while the holder remains, naming it.
  ASSERT_TRUE(eventually([&] {
    out = assignAddons(addons(2, 0), &rc);
    return rc != 0 && out.find("holder") != std::string::npos;
  })) << out;
  EXPECT_NE(out.find("AddonReductionBlocked"), std::string::npos) << out;
  EXPECT_EQ(planQuotaHard(), "4");
  EXPECT_EQ(jsonpath("gpudevice -n acme holder", "{.status.phase}"), "Bound");  // never touched

  // 3. the owner stops it; 4. the removal goes through; 5. HRQ shrinks.
  kubectl("delete gpudevice -n acme holder --wait=true --timeout=60s", &rc);
  ASSERT_EQ(rc, 0);
  double heldSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - heldSince).count();
  holdersUsed(0);
  ASSERT_TRUE(eventually([&] {
    out = assignAddons(addons(2, 0), &rc);
    return rc == 0;
  })) << out;
  ASSERT_TRUE(eventually([] { return planQuotaHard() == "2"; })) << "plan-quota: " << planQuotaHard();
  ASSERT_TRUE(eventually([] { return orgStatusDevicesHard() == "2"; }));

  // 6. released with its time: the gate reopens, the reservation is gone.
  releasedAt = rfc3339Now();
  commit(record("released", "  activatedAt: \"" + activatedAt + "\"\n  releasedAt: \"" + releasedAt + "\"\n"));
  ASSERT_TRUE(eventually([] { return gateIs("True") && classStatus("reservedDevices") == "0"; }))
      << kubectl(std::string("get gpudeviceclass ") + kPool + " -o yaml");
  EXPECT_EQ(condition("InvariantHolds"), "True");
  std::string window;
  ASSERT_TRUE(eventually([&] {
    window = usageLine("gpu-res-e2e-1");
    return window.find(releasedAt) != std::string::npos;
  })) << window;

  // (f) the holder's unit-seconds across a leader change: not lost, not doubled.
  std::vector<std::string> heldLines;
  ASSERT_TRUE(eventually([&] {
    heldLines = usageLines("\"name\":\"holder\"");
    return !heldLines.empty();
  })) << usageOf(replicas[leaderIndex()]);
  double unitSeconds = 0;
  std::string held;
  for (const auto& line : heldLines) {
    auto at = line.find("\"unitSeconds\":");
    ASSERT_NE(at, std::string::npos) << line;
    unitSeconds += std::stod(line.substr(at + 14));
    held += line + "\n";
  }
  // 3 units for heldSeconds, give or take the recorder's interval and the
  // watch delays on either side (a double count would be ~2x).
  EXPECT_GT(unitSeconds, 3 * (heldSeconds - 6)) << held;
  EXPECT_LT(unitSeconds, 3 * (heldSeconds + 6)) << held;
}

TEST(Reservation, AnOrganizationCreatedWithAddonsIsReviewedLikeAnUpdateAddingThem) {
  ASSERT_FALSE(releasedAt.empty()) << "runs after the release procedure";
  ASSERT_TRUE(eventually([] { return gateIs("True"); }));
  // 8 healthy >= 0 reserved + acme's 2 + spare 1: 5 left to sell.
  int rc = 0;
  std::string out;
  ASSERT_TRUE(eventually([&] {
    out = createGlobex(R"([{"addonId":"gpu-h200-dedicated","quantity":6}])", &rc);
    return rc != 0 && out.find("[InvariantBroken]") != std::string::npos;
  })) << out;
  EXPECT_NE(out.find("organization globex"), std::string::npos) << out;
  EXPECT_EQ(kubectl("get organization -n globex --ignore-not-found -o name"), "");
  out = createGlobex(R"([{"addonId":"gpu-h200-dedicated","quantity":5}])", &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually([] {
    return jsonpath("hrq -n globex plan-quota",
                    "{.spec.hard." + std::string("requests\\.nvidia\\.com/GH100_H200_SXM_141GB") + "}") == "5";
  })) << "globex's plan-quota was never written";
}

}  // namespace
}  // namespace tally::runtime::e2e
