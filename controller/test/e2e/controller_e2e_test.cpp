// tally-controller against a real kube-apiserver: two replicas of the real
// binary, started as processes; the leader creates the serving certificate
// and injects its CA into the GPUDevice ValidatingWebhookConfiguration, whose
// url clientConfig the API server calls over HTTPS. Users are `kubectl` (the
// admin, which is also --controller-identity, and an impersonated tenant).
//
// (a) every refusal code a GPUDevice create can meet, as kubectl shows it;
// (c) --dry-run=server leaves nothing; (e) a tenant's status write refused;
// DELETE of a device a running VMI holds refused naming the VMI; (h) both
// replicas answer, and after the leader is killed the other one admits
// orders and takes the Lease.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kTenant = "alice@acme";
constexpr const char* kConfiguration = "tally-e2e-gpudevices";

Replica* replicaA = nullptr;
Replica* replicaB = nullptr;
// Both replicas behind one address, which the webhook configuration names
// from the start: after the leader is killed no URL changes.
ReplicaService service;

class ControllerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "ctl-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    kubectl("create namespace tally-system", &rc);
    for (const char* ns : {"acme", "capped"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0);
    }
    // Two kwok nodes of 4 and 2 H200 units.
    ASSERT_TRUE(gpuNodes("gpu-a-", 1, 4));
    ASSERT_TRUE(gpuNodes("gpu-b-", 1, 2));
    applyYaml(gpuClass("h200", kH200, 5), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("licensed", "nvidia.com/licensed-gpu", 4, true), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("gated", "nvidia.com/gated-gpu", 4), &rc);
    ASSERT_EQ(rc, 0);
    kubectl(
        "patch gpudeviceclass gated --subresource=status --type=merge -p "
        "'{\"status\":{\"gateFailureId\":\"gated-e2e\",\"conditions\":[{\"type\":\"CreationOpen\",\"status\":"
        "\"False\",\"reason\":\"AuditFailed\",\"message\":\"e2e\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}'",
        &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("doomed", kH200, 4, false, ", finalizers: [e2e.tally.dev/hold]"), &rc);
    ASSERT_EQ(rc, 0);
    kubectl("delete gpudeviceclass doomed --wait=false", &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: gpus, namespace: capped}\n") +
                  "spec: {hard: {requests." + kH200 + ": \"1\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    // The tenant may write GPUDevices and their status as far as RBAC goes:
    // what refuses a status write here is the webhook.
    applyYaml(
        std::string("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: e2e-tenant}\n") +
            "rules:\n- apiGroups: [gpu.tally.dev]\n  resources: [gpudevices, gpudevices/status]\n" +
            "  verbs: [get, list, create, update, patch, delete]\n---\n" +
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: e2e-tenant}\n" +
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-tenant}\n" +
            "subjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: User, name: \"" + kTenant + "\"}\n",
        &rc);
    ASSERT_EQ(rc, 0);

    replicaA = new Replica(startReplica("replica-a", kConfiguration));
    ASSERT_GT(replicaA->pid, 0);
    // A leads before B starts, so killing A later is killing the leader.
    ASSERT_TRUE(eventually([] {
      return kubectl("get lease -n tally-system tally-controller -o jsonpath={.spec.holderIdentity}") == "replica-a";
    })) << "replica-a never took the Lease";
    replicaB = new Replica(startReplica("replica-b", kConfiguration));
    ASSERT_GT(replicaB->pid, 0);
    ASSERT_TRUE(service.start({replicaA, replicaB})) << "the proxy in front of both replicas did not start";
    applyYaml(shippedWebhooks(kConfiguration, service.port(), {{"gpudevices"}}), &rc);
    ASSERT_EQ(rc, 0);
    for (Replica* r : {replicaA, replicaB}) {
      ASSERT_TRUE(eventually([r] {
        return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200;
      })) << r->identity
          << " never became ready; log: " << r->log;
    }
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    // The API server's view of the configuration and its injected caBundle
    // lags: wait until an order passes the webhook.
    int n = 0;
    ASSERT_TRUE(eventually([&] {
      int code = 0;
      std::string warmup = "warmup-" + std::to_string(n++);
      std::string out = applyYaml(device("acme", warmup, "h200", 1), &code);
      if (code == 0) kubectl("delete gpudevice -n acme " + warmup, &code);
      return out.find("created") != std::string::npos;
    })) << "the API server never admitted through the webhook";
  }

  void TearDown() override {
    if (replicaA) stopReplica(*replicaA, SIGTERM);
    if (replicaB) stopReplica(*replicaB, SIGTERM);
    service.stop();
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ControllerEnvironment);

void expectRefused(const std::string& yaml, const std::string& code, const std::string& needle) {
  int rc = 0;
  std::string out = applyYaml(yaml, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("denied the request: tally: "), std::string::npos) << out;
  EXPECT_NE(out.find("[" + code + "]"), std::string::npos) << out;
  EXPECT_NE(out.find(needle), std::string::npos) << out;
  std::printf("%s", out.c_str());  // what a user of kubectl apply reads
}

TEST(GpuDeviceOrders, EveryRefusalCodeReachesKubectlWithItsMessage) {
  expectRefused(device("acme", "o-unknown", "b200", 1), "ClassUnknown",
                "gpudevice/acme/o-unknown names GPU class b200");
  expectRefused(device("acme", "o-doomed", "doomed", 1), "ClassDeleting", "doomed is being deleted");
  expectRefused(device("acme", "o-max", "h200", 6), "CountAboveMax", "asks for 6 GPU(s) of class h200");
  expectRefused(device("acme", "o-node", "h200", 5), "NoSingleNode", "gpudevice/acme/o-node");
  expectRefused(device("capped", "o-budget", "h200", 2), "BudgetExceeded", "capped");
  expectRefused(device("acme", "o-licensed", "licensed", 1), "NotEntitled", "gpu.tally.dev/entitled-licensed");
  expectRefused(device("acme", "o-gated", "gated", 1), "GateClosed", "gated");
  // A held device of 3, which the leader's binder places on gpu-a-0 (the
  // only node with 3 free), leaves 3 free in the pool.
  int rc = 0;
  applyYaml(device("acme", "held", "h200", 3), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually(
      [] {
        return kubectl("get gpudevice -n acme held -o jsonpath={.status.phase}/{.status.node}") == "Bound/gpu-a-0";
      },
      30s))
      << kubectl("get gpudevice -n acme held -o yaml");
  ASSERT_TRUE(eventually([] {
    int code = 0;
    std::string o = applyYaml(device("acme", "o-pool", "h200", 4), &code);
    return code != 0 && o.find("[PoolInsufficient]") != std::string::npos;
  })) << "no PoolInsufficient once 3 of 6 units are held";
  expectRefused(device("acme", "o-pool", "h200", 4), "PoolInsufficient", "pool h200 has 3 free unit(s)");
  for (const char* name : {"o-unknown", "o-doomed", "o-max", "o-node", "o-licensed", "o-gated", "o-pool"}) {
    EXPECT_NE(kubectl(std::string("get gpudevice -n acme ") + name).find("NotFound"), std::string::npos) << name;
  }
  // Released (the binder records it and lets the finalizer go): the pool is whole again.
  kubectl("delete gpudevice -n acme held --timeout=30s", &rc);
  EXPECT_EQ(rc, 0);
}

TEST(GpuDeviceOrders, ServerDryRunLeavesNothing) {
  int rc = 0;
  std::string out = applyYaml(device("acme", "dry", "h200", 1), &rc, "--dry-run=server");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("server dry run"), std::string::npos) << out;
  EXPECT_NE(kubectl("get gpudevice -n acme dry").find("NotFound"), std::string::npos);
  out = applyYaml(device("acme", "dry-refused", "h200", 6), &rc, "--dry-run=server");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[CountAboveMax]"), std::string::npos) << out;
}

TEST(GpuDeviceOrders, SpecIsImmutable) {
  int rc = 0;
  applyYaml(device("acme", "fixed", "h200", 1), &rc);
  ASSERT_EQ(rc, 0);
  std::string out = kubectl("patch gpudevice -n acme fixed --type=merge -p '{\"spec\":{\"count\":2}}'", &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("immutable"), std::string::npos) << out;
  kubectl("delete gpudevice -n acme fixed --timeout=30s", &rc);
}

TEST(GpuDeviceOrders, TenantStatusWriteIsRefused) {
  int rc = 0;
  applyYaml(device("acme", "forged", "h200", 1), &rc);
  ASSERT_EQ(rc, 0);
  std::string out = kubectl(std::string("--as=") + kTenant +
                                " --as-group=system:authenticated patch gpudevice -n acme forged --subresource=status "
                                "--type=merge -p '{\"status\":{\"phase\":\"Released\"}}'",
                            &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("written only by " + std::string(kAdmin) + ", not by " + kTenant), std::string::npos) << out;
  // The binder's status stands (Pending or Bound), not the tenant's.
  EXPECT_NE(kubectl("get gpudevice -n acme forged -o jsonpath={.status.phase}"), "Released");
  kubectl("delete gpudevice -n acme forged --timeout=30s", &rc);
}

TEST(GpuDeviceOrders, DeletingADeviceARunningVmiHoldsIsRefusedNamingTheVmi) {
  int rc = 0;
  applyYaml(
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: train, namespace: acme}\n"
      "spec: {domain: {devices: {}}}\n",
      &rc);
  ASSERT_EQ(rc, 0);
  kubectl("patch vmi -n acme train --subresource=status --type=merge -p '{\"status\":{\"phase\":\"Running\"}}'", &rc);
  ASSERT_EQ(rc, 0);
  const std::string uid = kubectl("get vmi -n acme train -o jsonpath={.metadata.uid}");
  applyYaml(device("acme", "attached", "h200", 1), &rc);
  ASSERT_EQ(rc, 0);
  std::string out = kubectl(
      "patch gpudevice -n acme attached --subresource=status --type=merge -p "
      "'{\"status\":{\"phase\":\"Attached\",\"node\":\"gpu-b-0\",\"attachedTo\":{\"namespace\":\"acme\",\"name\":"
      "\"train\",\"uid\":\"" +
          uid + "\"}}}'",
      &rc);
  ASSERT_EQ(rc, 0) << out;
  ASSERT_TRUE(eventually(
      [&] {
        out = kubectl("delete gpudevice -n acme attached --wait=false", &rc);
        return rc != 0 && out.find("[DeviceAttached]") != std::string::npos;
      },
      20s))
      << out;
  EXPECT_NE(out.find("vmi/acme/train"), std::string::npos) << out;
  // Once the VMI finished, the device may go.
  kubectl("patch vmi -n acme train --subresource=status --type=merge -p '{\"status\":{\"phase\":\"Succeeded\"}}'", &rc);
  ASSERT_TRUE(eventually(
      [&] {
        kubectl("delete gpudevice -n acme attached --wait=false", &rc);
        return rc == 0;
      },
      20s));
}

// The CountAboveMax refusals of CREATEs `r` answered so far.
long countAboveMaxAnswered(const Replica& r) {
  return static_cast<long>(
      metricOf(r, "tally_webhook_refusals_total", R"(code="CountAboveMax",operation="CREATE",webhook="gpudevices")"));
}

// Runs last (gtest keeps the file's order): it kills the leader.
TEST(GpuDeviceOrdersZ, BothReplicasAnswerAndOrdersAreAdmittedAfterTheLeaderDies) {
  // Both replicas decide orders that reach the one address: refusals sent
  // four at a time (so over several of the API server's connections) until
  // each replica counted one.
  const long beforeA = countAboveMaxAnswered(*replicaA), beforeB = countAboveMaxAnswered(*replicaB);
  std::atomic<int> probe{0};
  EXPECT_TRUE(eventually(
      [&] {
        std::vector<std::thread> senders;
        for (int t = 0; t < 4; ++t) {
          senders.emplace_back([&] {
            int code = 0;
            const std::string out = applyYaml(device("acme", "probe-" + std::to_string(probe++), "h200", 9), &code);
            EXPECT_NE(out.find("[CountAboveMax]"), std::string::npos) << out;
          });
        }
        for (auto& t : senders) t.join();
        return countAboveMaxAnswered(*replicaA) > beforeA && countAboveMaxAnswered(*replicaB) > beforeB;
      },
      30s))
      << "one address did not reach both replicas: " << countAboveMaxAnswered(*replicaA) - beforeA << " and "
      << countAboveMaxAnswered(*replicaB) - beforeB << " refusals answered";
  std::printf("both replicas answered through one address (%d probes)\n", probe.load());

  stopReplica(*replicaA, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  // Orders at once, nothing re-pointed: a create the dead leader's broken
  // connection failed is counted and sent again, as a client would.
  int admitted = 0, failed = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "after-" + std::to_string(i);
    for (int attempt = 0; attempt < 20; ++attempt) {
      int rc = 0;
      const std::string out = applyYaml(device("acme", name, "h200", 1), &rc);
      if (rc == 0) {
        ++admitted;
        break;
      }
      ++failed;
      std::printf("  %s failed (attempt %d): %s", name.c_str(), attempt + 1, out.c_str());
      std::this_thread::sleep_for(200ms);
    }
  }
  std::printf("after the kill: %d of 5 orders admitted, %d creates failed\n", admitted, failed);
  EXPECT_EQ(admitted, 5);
  EXPECT_EQ(failed, 0) << "admissions failed after the leader died behind the one address";
  EXPECT_TRUE(eventually(
      [] {
        return kubectl("get lease -n tally-system tally-controller -o jsonpath={.spec.holderIdentity}") == "replica-b";
      },
      30s))
      << "replica-b did not take the Lease";
  const double takeover = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("lease takeover after the leader was killed: %.1f s (lease duration 4 s, retry 0.5 s)\n", takeover);
  // Lease duration + a retry period + the time the orders above took.
  EXPECT_LT(takeover, 15.0);
}

TEST(GpuDeviceOrdersZ, MetricsCountTheRefusalsAReplicaAnswered) {
  const std::string metrics = metricsOf(*replicaB);
  EXPECT_NE(
      metrics.find(R"(tally_webhook_refusals_total{code="CountAboveMax",operation="CREATE",webhook="gpudevices"})"),
      std::string::npos)
      << metrics.substr(0, 2000);
  EXPECT_NE(metrics.find("tally_webhook_requests_total"), std::string::npos);
  EXPECT_NE(metrics.find("leader_election_master_status"), std::string::npos);
}

TEST(GpuDeviceOrdersZ, SigtermStopsAReplicaCleanly) {
  const auto start = std::chrono::steady_clock::now();
  const int status = stopReplica(*replicaB, SIGTERM);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status)) << "replica-b did not exit by itself: wait status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Within seconds, and inside the 30 s a Pod is given before SIGKILL
  // (terminationGracePeriodSeconds' default; the manifests keep it). A step of
  // the stop that takes over a second is named in the log: here the binder's
  // last write went through a webhook on this replica, which waited out the
  // API server's 10 s webhook timeout while the listener stopped first.
  std::ifstream logFile(replicaB->log);
  const std::string log((std::istreambuf_iterator<char>(logFile)), std::istreambuf_iterator<char>());
  std::printf("SIGTERM to exit: %.2f s\n", seconds);
  EXPECT_LT(seconds, 8.0) << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  EXPECT_EQ(log.find("slow shutdown step"), std::string::npos) << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  EXPECT_TRUE(log.find("msg=stopped ") != std::string::npos || log.find("msg=\"stopped\"") != std::string::npos)
      << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  // It released the Lease on its way out (no successor has to wait for expiry).
  EXPECT_EQ(kubectl("get lease -n tally-system tally-controller -o jsonpath={.spec.holderIdentity}"), "");
}

}  // namespace
}  // namespace tally::runtime::e2e

namespace tally::runtime::e2e {
namespace {

// The ts= of the first line of `log` holding `needle` (logfmt), as
// milliseconds since the epoch; -1 when there is none.
std::int64_t firstLogTime(const std::string& log, const std::string& needle) {
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    const auto at = line.find("ts=");
    if (at == std::string::npos) continue;
    auto t = parseRfc3339(std::string_view(line).substr(at + 3, 24));
    if (t) return t->seconds * 1000 + t->nanos / 1'000'000;
  }
  return -1;
}

// A leader cut off from the API server (its connections black-holed by a
// proxy, as a partition would) stops leading within its renew deadline,
// before its lease can pass to the other replica; when the partition heals it
// does not take the lease back. Lease 4 s, renew deadline 3 s, retry 0.5 s
// (startReplica's). These replicas hold a Lease of their own and run no
// leader-only controller, so the suite's replicas are not disturbed.
TEST(LeaderZ, ALeaderCutOffFromTheApiServerStopsLeadingBeforeTheOtherTakesOver) {
  const auto dir = std::filesystem::temp_directory_path() / ("ctl-partition-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // The cluster's kubeconfig with its server behind the proxy.
  std::ifstream original(cluster().kubeconfig());
  std::stringstream text;
  text << original.rdbuf();
  std::string kubeconfig = text.str();
  const std::string marker = "server: https://127.0.0.1:";
  const auto at = kubeconfig.find(marker);
  ASSERT_NE(at, std::string::npos) << kubeconfig;
  const auto end = kubeconfig.find('\n', at);
  const std::string apiPort = kubeconfig.substr(at + marker.size(), end - at - marker.size());
  const std::uint16_t proxyPort = freePort();
  kubeconfig.replace(at + marker.size(), end - at - marker.size(), std::to_string(proxyPort));
  const std::string proxied = (dir / "kubeconfig").string();
  std::ofstream(proxied) << kubeconfig;
  std::ofstream(dir / "backends") << "127.0.0.1:" << apiPort << "\n";
  const std::string block = (dir / "blocked").string();
  const auto proxy = startTcpProxy(proxyPort, (dir / "backends").string(), {"--block-file", block});

  const std::vector<std::string> own = {"--leader-election-id=tally-partition", "--cert-secret=tally-partition-tls",
                                        "--enable-device-binder=false",         "--enable-pool-auditor=false",
                                        "--enable-quota-controller=false",      "--enable-usage-recorder=false"};
  auto holder = [] { return kubectl("get lease -n tally-system tally-partition -o jsonpath={.spec.holderIdentity}"); };
  std::vector<std::string> viaProxy = own;
  viaProxy.push_back("--kubeconfig=" + proxied);
  Replica cut = startReplica("cut-off", "", viaProxy);
  ASSERT_GT(cut.pid, 0);
  ASSERT_TRUE(eventually([&] { return holder() == "cut-off"; }, 30s)) << "cut-off never led; log " << cut.log;
  Replica other = startReplica("takes-over", "", own);
  ASSERT_GT(other.pid, 0);
  std::this_thread::sleep_for(2s);  // a few renewals by the leader, seen by the other
  ASSERT_EQ(holder(), "cut-off");

  std::ofstream(block) << "partition\n";
  const auto blocked = std::chrono::system_clock::now();
  ASSERT_TRUE(eventually([&] { return holder() == "takes-over"; }, 30s)) << "no takeover; log " << other.log;
  const std::int64_t blockedMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(blocked.time_since_epoch()).count();
  EXPECT_TRUE(eventually([&] { return firstLogTime(cut.log, "msg=\"stopped leading\"") > 0; }, 10s))
      << "the cut-off leader never said it stopped leading; log " << cut.log;
  const std::int64_t stopped = firstLogTime(cut.log, "msg=\"stopped leading\"");
  const std::int64_t tookOver = firstLogTime(other.log, "msg=\"became leader\"");
  std::printf("partition at +0 ms: the cut-off leader stopped leading at +%lld ms, the other led at +%lld ms\n",
              static_cast<long long>(stopped - blockedMs), static_cast<long long>(tookOver - blockedMs));
  ASSERT_GT(tookOver, 0);
  EXPECT_LT(stopped, tookOver) << "two leaders at once: the cut-off one still led when the other took the Lease";
  EXPECT_LE(stopped - blockedMs, 3000 + 500 + 1000) << "not within the renew deadline (3 s) of its last renewal";

  // The partition heals: the old leader campaigns again but the Lease stays
  // with the new one.
  std::filesystem::remove(block);
  std::this_thread::sleep_for(6s);
  EXPECT_EQ(holder(), "takes-over");
  EXPECT_EQ(::kill(cut.pid, 0), 0) << "the cut-off replica exited instead of waiting as a standby";
  stopReplica(cut, SIGTERM);
  stopReplica(other, SIGTERM);
  kubectl("delete lease -n tally-system tally-partition");
}

}  // namespace
}  // namespace tally::runtime::e2e
