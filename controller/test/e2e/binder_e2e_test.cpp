// The device binder of the real tally-controller binary, two replicas, against
// a real kube-apiserver calling their webhook over HTTPS with the injected
// caBundle; kwok nodes. The replicas serve certificates that live 12 s (CA
// 30 s), so rotations run all the time.
//
// (b) an accepted order is Bound on one node, with its finalizer, condition and
// Event; deleting it records the release; (d) 50 orders racing for 20 units:
// exactly 20 Bound, no node over its units, every other order refused at
// admission or Pending with a reason, twice, the second time with the leader
// killed mid-run; (f) a deleted node's devices are Lost, still counted in the
// tenant's budget, and Bound again when the node returns; a VMI's device set
// placed whole on one node; (g) certificate
// rotations (serving and CA) during a stream of orders fail no admission.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/state/informers.hpp"
#include "tally/state/writer.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-binder-e2e";
constexpr int kNodes = 5, kUnitsPerNode = 4;  // the race pool: 20 units

const std::vector<std::string> kShortCertificates = {"--serving-cert-validity=12s", "--ca-validity=30s",
                                                     "--ca-overlap=4s", "--binder-retry-interval=1s"};

Replica* replicas[2] = {nullptr, nullptr};
// Both replicas behind one address, named by the webhook configuration from
// the start: after a kill no URL changes.
ReplicaService service;

Replica& leader() {
  const std::string holder = leaseHolder();
  for (Replica* r : replicas) {
    if (r && r->identity == holder) return *r;
  }
  return *replicas[0];
}

struct DeviceRow {
  std::string name, phase, node, reason;
  bool finalizer = false;
};

// Every GPUDevice of a namespace: name, phase, node, Bound condition reason, finalizer.
std::vector<DeviceRow> devices(const std::string& ns) {
  std::string out =
      kubectl("get gpudevices -n " + ns +
              " -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase}/ {.status.node}/ "
              "{.status.conditions[?(@.type==\"Bound\")].reason}/ {.metadata.finalizers}/{\"\\n\"}{end}'");
  std::vector<DeviceRow> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    DeviceRow r;
    std::string phase, node, reason, finalizers;
    fields >> r.name >> phase >> node >> reason >> finalizers;
    if (r.name.empty()) continue;
    auto cut = [](std::string s) { return s.empty() ? s : s.substr(0, s.size() - 1); };
    r.phase = cut(phase);
    r.node = cut(node);
    r.reason = cut(reason);
    r.finalizer = finalizers.find("gpu.tally.dev/release") != std::string::npos;
    rows.push_back(r);
  }
  return rows;
}

class BinderEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "binder-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme", "race", "lossy"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("one-", 1, 4));
    ASSERT_TRUE(gpuNodes("race-", kNodes, kUnitsPerNode, "nvidia.com/race-gpu"));
    ASSERT_TRUE(gpuNodes("lossy-", 2, 2, "nvidia.com/lossy-gpu"));
    applyYaml(gpuClass("h200", kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("race", "nvidia.com/race-gpu", 4), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("lossy", "nvidia.com/lossy-gpu", 2), &rc);
    ASSERT_EQ(rc, 0);
    replicas[0] = new Replica(startReplica("binder-a", kConfiguration, kShortCertificates));
    ASSERT_TRUE(eventually([] { return leaseHolder() == "binder-a"; })) << "binder-a never took the Lease";
    replicas[1] = new Replica(startReplica("binder-b", kConfiguration, kShortCertificates));
    ASSERT_TRUE(service.start({replicas[0], replicas[1]})) << "the proxy in front of both replicas did not start";
    applyYaml(shippedWebhooks(kConfiguration, service.port(), {{"gpudevices"}}), &rc);
    ASSERT_EQ(rc, 0);
    for (Replica* r : replicas) {
      ASSERT_TRUE(eventually([r] {
        return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200;
      })) << r->identity
          << " never became ready; log: " << r->log;
    }
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    ASSERT_TRUE(eventually([] {
      int code = 0;
      std::string out = applyYaml(device("acme", "warmup", "h200", 9), &code);
      return code != 0 && out.find("[CountAboveMax]") != std::string::npos;
    })) << "the API server never called the webhook";
  }
  void TearDown() override {
    for (Replica* r : replicas) {
      if (r) stopReplica(*r, SIGTERM);
    }
    service.stop();
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new BinderEnvironment);

TEST(Binder, AnOrderIsBoundWithFinalizerConditionAndEventAndItsReleaseIsRecorded) {
  int rc = 0;
  const auto ordered = std::chrono::steady_clock::now();
  applyYaml(device("acme", "first", "h200", 3), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(
      eventually([] { return kubectl("get gpudevice -n acme first -o jsonpath={.status.phase}") == "Bound"; }, 20s))
      << kubectl("get gpudevice -n acme first -o yaml");
  std::printf("order Bound %.2f s after kubectl apply\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - ordered).count());
  auto rows = devices("acme");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].node, "one-0");
  EXPECT_EQ(rows[0].reason, "Placed");
  EXPECT_TRUE(rows[0].finalizer);
  EXPECT_NE(kubectl("get events -n acme --field-selector involvedObject.name=first -o jsonpath={.items[*].reason}")
                .find("Placed"),
            std::string::npos);
  // The webhook, on either replica, now sees 1 free unit on the only node.
  std::string out = applyYaml(device("acme", "second", "h200", 2), &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[PoolInsufficient]"), std::string::npos) << out;

  kubectl("delete gpudevice -n acme first --timeout=30s", &rc);
  EXPECT_EQ(rc, 0) << "the finalizer was not removed";
  EXPECT_NE(kubectl("get events -n acme --field-selector involvedObject.name=first -o jsonpath={.items[*].reason}")
                .find("Released"),
            std::string::npos);
  const std::string metrics = metricsOf(leader());
  EXPECT_NE(metrics.find("tally_controller_binder_placements_total"), std::string::npos);
  EXPECT_NE(metrics.find("tally_controller_binder_releases_total 1"), std::string::npos) << metrics.substr(0, 3000);
}

// 50 orders of one GPU at once, from 10 threads, through the webhook; the
// leader killed once it placed `killAfter` of them (0: not killed). With a
// kill, only the first wave of orders is created before it and the rest after
// it, so both leaders have orders to place however fast the first one is.
void race(int round, int killAfter) {
  constexpr int kFirstWave = 10;  // fewer than the 20 units: the standby must place the rest
  std::shared_ptr<Client> client = cluster().client();
  const Resource res = Resource::of("gpu.tally.dev", "v1alpha1", "gpudevices", "race");
  std::atomic<int> next{0}, admitted{0}, refused{0}, failed{0};
  std::mutex mu;
  std::map<std::string, int> refusals;
  std::vector<std::string> failures;
  std::atomic<bool> killed{killAfter == 0};
  Replica* victim = killAfter > 0 ? &leader() : nullptr;
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < 50;) {
        while (i >= kFirstWave && !killed) std::this_thread::sleep_for(10ms);
        const std::string name = "r" + std::to_string(round) + "-" + std::to_string(i);
        const std::string body =
            "{\"apiVersion\":\"gpu.tally.dev/v1alpha1\",\"kind\":\"GPUDevice\",\"metadata\":"
            "{\"name\":\"" +
            name + "\",\"namespace\":\"race\"},\"spec\":{\"class\":\"race\",\"count\":1}}";
        for (int attempt = 0;; ++attempt) {
          auto created = client->create(res, body);
          if (created) {
            ++admitted;
            break;
          }
          const std::string message = created.error().describe();
          if (message.find("denied the request") != std::string::npos) {
            ++refused;
            std::lock_guard lock(mu);
            const auto open = message.find("[");
            refusals[message.substr(open, message.find("]", open) - open + 1)]++;
            break;
          }
          // A webhook call that failed (a connection of the killed leader):
          // counted, and the create retried as a client would.
          ++failed;
          {
            std::lock_guard lock(mu);
            failures.push_back(name + ": " + message);
          }
          if (attempt > 100) {
            ADD_FAILURE() << name << ": " << message;
            break;
          }
          std::this_thread::sleep_for(100ms);
        }
      }
    });
  }
  if (killAfter > 0) {
    // The leader is killed once it has placed `killAfter` of the orders, and
    // the webhook repointed at the standby.
    const bool placedSome = eventually(
        [&] {
          int bound = 0;
          for (const auto& r : devices("race")) bound += r.phase == "Bound";
          return bound >= killAfter;
        },
        30s);
    EXPECT_TRUE(placedSome) << "the leader placed fewer than " << killAfter << " orders";
    int bound = 0;
    for (const auto& r : devices("race")) bound += r.phase == "Bound";
    stopReplica(*victim, SIGKILL);
    std::printf("round %d: killed the leader %s after it placed %d of the first %d orders\n", round,
                victim->identity.c_str(), bound, kFirstWave);
    killed = true;  // before any assertion that could return: the threads wait on it
  }
  for (auto& t : threads) t.join();
  std::printf("round %d: %d admitted, %d refused at admission, %d creates failed (retried):", round, admitted.load(),
              refused.load(), failed.load());
  for (const auto& [code, n] : refusals) std::printf(" %s %d", code.c_str(), n);
  std::printf("\n");
  for (const auto& f : failures) std::printf("  failed: %s\n", f.c_str());
  // Without a kill no call may fail; with one, only the calls the killed
  // leader held when it died (the API server does not retry a POST whose
  // connection broke): one per client thread at most.
  EXPECT_LE(failed.load(), killAfter > 0 ? 10 : 0);
  EXPECT_EQ(admitted + refused, 50);
  EXPECT_GE(admitted.load(), 20) << "the webhook refused orders the pool could hold";
  if (victim) {
    // The standby took over by itself (the Lease expired); the killed replica
    // comes back as a new standby (a new process, so a new identity: one
    // named like the dead holder would take its Lease back at once).
    EXPECT_TRUE(eventually([&] { return leaseHolder() != victim->identity && !leaseHolder().empty(); }, 20s));
    std::printf("round %d: the standby %s holds the Lease\n", round, leaseHolder().c_str());
    *victim = startReplica(victim->identity + "-again", kConfiguration, kShortCertificates);
    service.endpoints({replicas[0], replicas[1]});  // the replacement joins the Service
  }
}

void expectExactlyTheUnits(int round) {
  std::vector<DeviceRow> rows;
  const auto start = std::chrono::steady_clock::now();
  const bool settled = eventually(
      [&] {
        rows = devices("race");
        int bound = 0;
        for (const auto& r : rows) {
          if (r.phase == "Bound") ++bound;
          // Pending without a reason: the binder has not decided it yet.
          else if (r.phase != "Pending" || r.reason.empty())
            return false;
        }
        return bound == kNodes * kUnitsPerNode;
      },
      60s);
  std::printf("round %d: settled in %.1f s\n", round,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::map<std::string, int> perNode, reasons;
  int bound = 0;
  for (const auto& r : rows) {
    if (r.phase == "Bound") {
      ++bound;
      ++perNode[r.node];
      EXPECT_TRUE(r.finalizer) << r.name;
    } else {
      ++reasons[r.reason];
    }
  }
  EXPECT_TRUE(settled) << "not every order settled";
  EXPECT_EQ(bound, kNodes * kUnitsPerNode);
  EXPECT_EQ(perNode.size(), std::size_t(kNodes));
  for (const auto& [node, n] : perNode) EXPECT_LE(n, kUnitsPerNode) << node << " is over its units";
  std::printf("round %d: %d Bound on %zu nodes; Pending by reason:", round, bound, perNode.size());
  for (const auto& [reason, n] : reasons) std::printf(" %s %d", reason.c_str(), n);
  std::printf("\n");
  // Still so a few seconds later (no late double placement).
  std::this_thread::sleep_for(3s);
  int later = 0;
  for (const auto& r : devices("race")) later += r.phase == "Bound";
  EXPECT_EQ(later, kNodes * kUnitsPerNode);
}

void deleteAll(const std::string& ns) {
  int rc = 0;
  std::string out;
  // A webhook replica's cache may still hold what stopped holding the devices a moment ago.
  EXPECT_TRUE(eventually(
      [&] {
        out = kubectl("delete gpudevices -n " + ns + " --all --timeout=120s", &rc);
        return rc == 0;
      },
      20s))
      << out;
  EXPECT_TRUE(eventually([&] { return devices(ns).empty(); }, 60s)) << "releases not recorded in " << ns;
}

TEST(Binder, FiftyOrdersRaceForTwentyUnits) {
  race(1, 0);
  expectExactlyTheUnits(1);
  deleteAll("race");
}

TEST(Binder, FiftyOrdersRaceForTwentyUnitsWhileTheLeaderIsKilled) {
  race(2, 3);
  expectExactlyTheUnits(2);
  const std::string holder = leaseHolder();
  std::printf("round 2: lease held by %s after the kill\n", holder.c_str());
  // Both leaders placed part of the round: the killed one before, the standby after.
  std::map<std::string, int> placedBy;
  std::istringstream events(
      kubectl("get events -n race -o 'jsonpath={range .items[?(@.reason==\"Placed\")]}{.involvedObject.name} "
              "{.reportingInstance}{\"\\n\"}{end}'"));
  for (std::string object, instance; events >> object >> instance;) {
    if (object.rfind("r2-", 0) == 0) ++placedBy[instance];
  }
  std::printf("round 2: placements by replica:");
  for (const auto& [who, n] : placedBy) std::printf(" %s %d", who.c_str(), n);
  std::printf("\n");
  EXPECT_EQ(placedBy.size(), 2u) << "the placements of round 2 were not shared by the killed leader and its successor";
  deleteAll("race");
  // Both replicas serve again (the killed one restarted as the standby).
  for (Replica* r : replicas) {
    EXPECT_TRUE(
        eventually([r] { return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200; }));
  }
}

TEST(Binder, ADeletedNodeLosesItsDevicesTheBudgetKeepsThemAndTheyReturnWithIt) {
  int rc = 0;
  // 2 nodes of 2: lossy-0 and lossy-1, one device of 2 on each.
  for (const char* name : {"hold-1", "hold-2"}) {
    applyYaml(device("lossy", name, "lossy", 2), &rc);
    ASSERT_EQ(rc, 0);
  }
  ASSERT_TRUE(eventually([] {
    auto rows = devices("lossy");
    return rows.size() == 2 && rows[0].phase == "Bound" && rows[1].phase == "Bound";
  }));
  std::string lostNode;
  for (const auto& r : devices("lossy")) {
    if (r.name == "hold-1") lostNode = r.node;
  }
  ASSERT_FALSE(lostNode.empty());
  // The tenant's budget is exactly what it holds.
  applyYaml(std::string("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: gpus, namespace: lossy}\n") +
                "spec: {hard: {requests.nvidia.com/lossy-gpu: \"4\"}}\n",
            &rc);
  ASSERT_EQ(rc, 0);
  const auto deleted = std::chrono::steady_clock::now();
  kubectl("delete node " + lostNode, &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(
      eventually([] { return kubectl("get gpudevice -n lossy hold-1 -o jsonpath={.status.phase}") == "Lost"; }, 20s))
      << kubectl("get gpudevice -n lossy hold-1 -o yaml");
  std::printf("device Lost %.2f s after its node was deleted\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - deleted).count());
  EXPECT_EQ(kubectl("get gpudevice -n lossy hold-1 -o 'jsonpath={.status.conditions[?(@.type==\"Bound\")].reason}'"),
            "NodeGone");
  EXPECT_EQ(kubectl("get gpudevice -n lossy hold-2 -o jsonpath={.status.phase}"), "Bound");
  // Its node's units are gone (the pool has none free) and the budget still
  // counts it (2 Lost + 2 Bound of 4).
  std::string out;
  ASSERT_TRUE(eventually(
      [&] {
        out = applyYaml(device("lossy", "more", "lossy", 1), &rc);
        return rc != 0 && out.find("[BudgetExceeded]") != std::string::npos;
      },
      20s))
      << out;
  EXPECT_NE(out.find("[PoolInsufficient]"), std::string::npos) << out;
  // The node returns: the device holds its units again.
  const auto back = std::chrono::steady_clock::now();
  ASSERT_TRUE(gpuNodes("lossy-", 2, 2, "nvidia.com/lossy-gpu"));
  ASSERT_TRUE(
      eventually([] { return kubectl("get gpudevice -n lossy hold-1 -o jsonpath={.status.phase}") == "Bound"; }, 30s))
      << kubectl("get gpudevice -n lossy hold-1 -o yaml");
  std::printf("device Bound again %.2f s after its node returned\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - back).count());
  EXPECT_EQ(kubectl("get gpudevice -n lossy hold-1 -o jsonpath={.status.node}"), lostNode);
  EXPECT_EQ(kubectl("get gpudevice -n lossy hold-1 -o 'jsonpath={.status.conditions[?(@.type==\"Bound\")].reason}'"),
            "Recovered");
  const std::string metrics = metricsOf(leader());
  EXPECT_NE(metrics.find("tally_controller_binder_lost_total 1"), std::string::npos) << metrics.substr(0, 3000);
  EXPECT_NE(metrics.find("tally_controller_binder_recovered_total 1"), std::string::npos);
  deleteAll("lossy");
}

TEST(Binder, AVmisDeviceSetIsPlacedWholeOnOneNode) {
  int rc = 0;
  // seta-0 has 2 units, setb-0 has 4: alone, each device of 2 would go to the
  // best fit seta-0 first; as the set of one VMI both go to setb-0.
  ASSERT_TRUE(gpuNodes("seta-", 1, 2, "nvidia.com/set-gpu"));
  ASSERT_TRUE(gpuNodes("setb-", 1, 4, "nvidia.com/set-gpu"));
  applyYaml(gpuClass("setgpu", "nvidia.com/set-gpu", 4), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor never decided pool setgpu";
  kubectl("create namespace sets", &rc);
  applyYaml(
      "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: vm, namespace: sets,\n"
      "  annotations: {gpu.tally.dev/devices: '[\"set-a\", \"set-b\"]'}}\nspec: {domain: {devices: {}}}\n",
      &rc);
  ASSERT_EQ(rc, 0);
  std::this_thread::sleep_for(2s);  // the VMI reaches the binder's cache before its devices
  applyYaml(device("sets", "set-a", "setgpu", 2) + "---\n" + device("sets", "set-b", "setgpu", 2), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually(
      [] {
        auto rows = devices("sets");
        return rows.size() == 2 && rows[0].phase == "Bound" && rows[1].phase == "Bound";
      },
      20s))
      << kubectl("get gpudevices -n sets -o yaml");
  for (const auto& r : devices("sets")) EXPECT_EQ(r.node, "setb-0") << r.name;
  // While the VMI (not finished) names them, they are not released.
  std::string out = kubectl("delete gpudevice -n sets set-a --wait=false", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[DeviceAttached]"), std::string::npos) << out;
  kubectl("delete vmi -n sets vm", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return kubectl("get vmi -n sets -o name").empty(); }, 20s));
  deleteAll("sets");
}

TEST(Binder, CertificateRotationsDuringAStreamOfOrdersFailNoAdmission) {
  auto secretField = [](const char* field) {
    return kubectl(std::string("get secret -n tally-system tally-webhook-tls -o 'jsonpath={.data.") + field + "}'");
  };
  std::set<std::string> servingSeen{secretField("tls\\.crt")}, caSeen{secretField("ca\\.crt")};
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop) {
      servingSeen.insert(secretField("tls\\.crt"));
      caSeen.insert(secretField("ca\\.crt"));
      std::this_thread::sleep_for(500ms);
    }
  });
  // Orders through the webhook for 40 s (server dry runs: each is a full
  // admission, nothing stays), then a real one.
  const auto end = std::chrono::steady_clock::now() + 40s;
  int ok = 0, failed = 0;
  std::string lastFailure;
  while (std::chrono::steady_clock::now() < end) {
    int rc = 0;
    std::string out = applyYaml(device("acme", "stream", "h200", 1), &rc, "--dry-run=server");
    if (rc == 0) {
      ++ok;
    } else {
      ++failed;
      lastFailure = out;
    }
  }
  stop = true;
  watcher.join();
  std::printf("stream: %d admissions, %d failed; serving certificates seen %zu, CA bundles seen %zu\n", ok, failed,
              servingSeen.size(), caSeen.size());
  EXPECT_EQ(failed, 0) << lastFailure;
  EXPECT_GT(ok, 20);
  EXPECT_GE(servingSeen.size(), 4u) << "the serving certificate did not rotate during the stream";
  EXPECT_GE(caSeen.size(), 2u) << "the CA did not rotate during the stream";
}

// Runs last: it stops both replicas and drops the webhook, then drives a
// binder of its own (real informers, the real API server) whose write is
// overtaken once between its read and its write.
TEST(BinderZ, AWriteOvertakenBetweenReadAndWriteIsReadAndDecidedAgain) {
  for (Replica* r : replicas) {
    if (r) stopReplica(*r, SIGTERM);
  }
  int rc = 0;
  kubectl(std::string("delete validatingwebhookconfiguration ") + kConfiguration, &rc);
  ASSERT_EQ(rc, 0);
  kubectl("create namespace conflict", &rc);
  applyYaml(device("conflict", "c1", "h200", 1), &rc);
  ASSERT_EQ(rc, 0);

  std::shared_ptr<Client> client = cluster().client();
  observability::Registry registry;
  int overtaken = 0;
  controller::DeviceBinderOptions o;
  o.instance = "conflict-test";
  o.metrics = &registry;
  o.beforeWrite = [&](const std::string& key) {
    // The first write the binder decides (its finalizer) is overtaken by a
    // tenant's label change: a newer resourceVersion.
    if (key != "conflict/c1" || overtaken++ > 0) return;
    int code = 0;
    kubectl("label gpudevice -n conflict c1 overtaken=yes", &code);
    EXPECT_EQ(code, 0);
  };
  controller::DeviceBinder binder(client, o);
  state::SourceOptions sources;
  sources.billingPlans.reset();
  state::Writer::Options wo;
  wo.watched = state::watchedKinds(sources);
  wo.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  wo.observers = {&binder};
  state::Writer writer(wo);
  binder.readFrom(writer.snapshots());
  state::Informers informers(client, writer, sources, {});
  writer.start();
  informers.start();
  ASSERT_TRUE(eventually([&] {
    auto snap = writer.snapshots().read();
    return snap->ready() && snap->cluster().devices.contains("conflict/c1");
  })) << "the test's own caches did not sync";

  std::stop_source stop;
  auto result = binder.reconcile("conflict/c1", stop.get_token());
  ASSERT_TRUE(result) << result.error().describe();
  EXPECT_EQ(overtaken, 3) << "read, overtaken, read again, finalizer, status: the hook runs once per read";
  EXPECT_EQ(kubectl("get gpudevice -n conflict c1 -o jsonpath={.status.phase}"), "Bound");
  EXPECT_EQ(kubectl("get gpudevice -n conflict c1 -o jsonpath={.metadata.labels.overtaken}"), "yes")
      << "the tenant's change was overwritten";
  EXPECT_NE(registry.render().find("tally_controller_binder_conflicts_total 1"), std::string::npos)
      << registry.render();
  informers.stop();
  writer.stop();
}

}  // namespace
}  // namespace tally::runtime::e2e
