// The catalogue against a real kube-apiserver and the real tally-controller:
// (h) for 200 random orders (class, namespace, count), GET /options says count
// N is orderable <=> a GPUDevice of count N is admitted (kubectl create
// --dry-run=server, so nothing changes between the two questions; some real
// creates move the state in between); the endpoint authorizes per namespace
// with real TokenReviews and SubjectAccessReviews (a ServiceAccount token
// from `kubectl create token`, RBAC for one namespace only); and `tallyctl
// report`, `plan` and `options` read live equal the same commands on a
// snapshot file of the same objects.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "harness.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-e2e-catalog";
Replica* replica = nullptr;
std::string ordererToken;  // may create gpudevices in every namespace
std::string tenantToken;   // may create gpudevices in acme-ml only

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string tempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("catalog-e2e-" + std::to_string(::getpid()) + "-" + name)).string();
}

class CatalogEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "cat-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    kubectl("create namespace tally-system", &rc);
    // acme with the HNC child acme-ml (the test plays HNC: tree labels and HRQ status).
    for (const char* ns : {"acme", "acme-ml", "beta", "capped"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0);
    }
    kubectl("label namespace acme acme.tree.hnc.x-k8s.io/depth=0", &rc);
    ASSERT_EQ(rc, 0);
    kubectl("label namespace acme-ml acme-ml.tree.hnc.x-k8s.io/depth=0 acme.tree.hnc.x-k8s.io/depth=1", &rc);
    ASSERT_EQ(rc, 0);
    kubectl("label namespace beta gpu.tally.dev/entitled-licensed=true", &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(gpuNodes("gpu-a-", 1, 4));
    ASSERT_TRUE(gpuNodes("gpu-b-", 2, 2));
    ASSERT_TRUE(gpuNodes("lic-", 1, 3, "nvidia.com/licensed-gpu"));
    applyYaml(gpuClass("h200", kH200, 5), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(gpuClass("licensed", "nvidia.com/licensed-gpu", 3, true), &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: hnc.x-k8s.io/v1alpha2\nkind: HierarchicalResourceQuota\n") +
                  "metadata: {name: plan-quota, namespace: acme}\nspec: {hard: {requests." + kH200 + ": \"5\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    applyYaml(std::string("apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: gpus, namespace: capped}\n") +
                  "spec: {hard: {requests." + kH200 + ": \"2\"}}\n",
              &rc);
    ASSERT_EQ(rc, 0);
    // Who asks the catalogue: an orderer for every namespace, a tenant for acme-ml only.
    applyYaml(
        std::string("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: orderer, namespace: tally-system}\n---\n") +
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: tenant, namespace: acme-ml}\n---\n" +
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: e2e-orderer}\n" +
            "rules:\n- apiGroups: [gpu.tally.dev]\n  resources: [gpudevices]\n  verbs: [create]\n---\n" +
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: e2e-orderer}\n" +
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-orderer}\n" +
            "subjects:\n- {kind: ServiceAccount, name: orderer, namespace: tally-system}\n---\n" +
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: orderer, namespace: acme-ml}\n" +
            "rules:\n- apiGroups: [gpu.tally.dev]\n  resources: [gpudevices]\n  verbs: [create]\n---\n" +
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: tenant, namespace: "
            "acme-ml}\n" +
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: orderer}\n" +
            "subjects:\n- {kind: ServiceAccount, name: tenant, namespace: acme-ml}\n",
        &rc);
    ASSERT_EQ(rc, 0);
    ordererToken = trimmed(kubectl("create token orderer -n tally-system --duration=1h", &rc));
    ASSERT_EQ(rc, 0) << ordererToken;
    tenantToken = trimmed(kubectl("create token tenant -n acme-ml --duration=1h", &rc));
    ASSERT_EQ(rc, 0) << tenantToken;

    replica = new Replica(startReplica("replica-a", kConfiguration, {"--catalog-review-ttl=2s"}));
    ASSERT_GT(replica->pid, 0);
    applyYaml(shippedWebhooks(kConfiguration, replica->webhookPort, {{"gpudevices"}}), &rc);
    ASSERT_EQ(rc, 0);
    ASSERT_TRUE(eventually([] {
      return httpStatus("http://127.0.0.1:" + std::to_string(replica->opsPort) + "/readyz") == 200;
    })) << "the replica never became ready; log: "
        << replica->log;
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
    int n = 0;
    ASSERT_TRUE(eventually([&] {
      int code = 0;
      std::string warmup = "warmup-" + std::to_string(n++);
      std::string out = applyYaml(device("beta", warmup, "h200", 1), &code);
      if (code == 0) kubectl("delete gpudevice -n beta " + warmup + " --timeout=30s", &code);
      return out.find("created") != std::string::npos;
    })) << "the API server never admitted through the webhook";
  }

  void TearDown() override {
    if (replica) stopReplica(*replica, SIGTERM);
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new CatalogEnvironment);

struct Answer {
  int status = 0;
  std::string body;
};

Answer options(const std::string& ns, const std::string& token) {
  int rc = 0;
  const std::string auth = token.empty() ? "" : "-H 'Authorization: Bearer " + token + "' ";
  std::string out = runCommand("curl -sk --max-time 10 -w '\\n%{http_code}' " + auth + "'https://127.0.0.1:" +
                                   std::to_string(replica->webhookPort) + "/options?namespace=" + ns + "'",
                               &rc);
  Answer a;
  const auto cut = out.rfind('\n');
  if (cut == std::string::npos) return a;
  a.body = out.substr(0, cut);
  a.status = std::atoi(out.c_str() + cut + 1);
  return a;
}

// largestCount of `cls` in a GET /options body; -1 when the class is not listed.
int largestCount(const std::string& body, const std::string& cls) {
  std::smatch m;
  const std::regex re("\"class\":\"" + cls + "\"[^}]*?\"largestCount\":([0-9]+)");
  if (!std::regex_search(body, m, re)) return -1;
  return std::stoi(m[1].str());
}

bool admits(const std::string& ns, const std::string& name, const std::string& cls, int count, bool dryRun,
            std::string* out) {
  int rc = 0;
  *out = applyYaml(device(ns, name, cls, count), &rc, dryRun ? "--dry-run=server" : "");
  return rc == 0;
}

TEST(Catalog, TheEndpointAuthorizesPerNamespace) {
  Answer own = options("acme-ml", tenantToken);
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_NE(own.body.find("\"namespace\":\"acme-ml\""), std::string::npos) << own.body;
  Answer other = options("beta", tenantToken);
  EXPECT_EQ(other.status, 403) << other.body;
  EXPECT_NE(other.body.find("system:serviceaccount:acme-ml:tenant"), std::string::npos) << other.body;
  EXPECT_NE(other.body.find("beta"), std::string::npos) << other.body;
  EXPECT_EQ(other.body.find("largestCount"), std::string::npos) << other.body;
  Answer none = options("acme-ml", "");
  EXPECT_EQ(none.status, 401) << none.body;
  Answer forged = options("acme-ml", "not-a-token");
  EXPECT_EQ(forged.status, 401) << forged.body;
  Answer missing = options("", ordererToken);
  EXPECT_EQ(missing.status, 400) << missing.body;
  EXPECT_NE(metricsOf(*replica).find("tally_controller_catalog_requests_total{code=\"403\"}"), std::string::npos);
}

TEST(Catalog, OrderableInTheCatalogueIffAdmittedByTheWebhook) {
  std::mt19937 rng(17);
  const std::vector<std::string> namespaces = {"acme", "acme-ml", "beta", "capped"};
  const std::vector<std::pair<std::string, int>> classes = {{"h200", 5}, {"licensed", 3}};
  int agreed = 0, admittedCount = 0, refusedCount = 0, moved = 0, created = 0;
  std::vector<std::string> disagreements;
  for (int i = 0; i < 200; ++i) {
    const std::string ns = namespaces[rng() % namespaces.size()];
    const auto& [cls, maxCount] = classes[rng() % classes.size()];
    // Mostly small orders (which fit now and then), some up to maxCount + 1.
    const unsigned span = rng() % 3 == 0 ? static_cast<unsigned>(maxCount + 1) : 2u;
    const int count = 1 + static_cast<int>(rng() % span);
    const std::string name = "order-" + std::to_string(i);
    // Ask, order (dry run), ask again: when the two answers differ the state
    // moved between them (the binder placing an earlier order) and the order is asked again.
    bool decided = false;
    for (int attempt = 0; attempt < 5 && !decided; ++attempt) {
      Answer before = options(ns, ordererToken);
      ASSERT_EQ(before.status, 200) << before.body;
      std::string out;
      const bool admitted = admits(ns, name, cls, count, true, &out);
      Answer after = options(ns, ordererToken);
      ASSERT_EQ(after.status, 200) << after.body;
      if (before.body != after.body) {
        ++moved;
        continue;
      }
      decided = true;
      const int largest = largestCount(before.body, cls);
      (admitted ? admittedCount : refusedCount)++;
      if ((count <= largest) == admitted) {
        ++agreed;
      } else if (disagreements.size() < 10) {
        disagreements.push_back(cls + " x" + std::to_string(count) + " in " + ns + ": catalogue largest " +
                                std::to_string(largest) + ", webhook " + (admitted ? "admits" : out));
      }
      // Now and then a real order that the webhook admits moves the state.
      if (admitted && rng() % 8 == 0) {
        ASSERT_TRUE(admits(ns, name, cls, count, false, &out)) << out;
        ++created;
        eventually(
            [&] { return kubectl("get gpudevice -n " + ns + " " + name + " -o jsonpath={.status.phase}") == "Bound"; },
            10s);
      }
    }
    EXPECT_TRUE(decided) << "the state kept moving under order " << i;
  }
  std::cout << "catalogue vs webhook: " << agreed << " of 200 agree (" << admittedCount << " admitted, " << refusedCount
            << " refused, " << created << " created, " << moved << " asked again)\n";
  for (const auto& d : disagreements) std::cout << "  disagreement: " << d << '\n';
  EXPECT_EQ(agreed, 200);
  EXPECT_GT(admittedCount, 10);
  EXPECT_GT(refusedCount, 10);
  EXPECT_GT(created, 0);
}

// What the live path and the snapshot path print for the same objects.
TEST(Catalog, TallyctlLiveEqualsTheSnapshotPath) {
  int rc = 0;
  const std::string snapshot = tempFile("snapshot.json");
  const std::string kinds =
      "nodes,pods,namespaces,resourcequotas,hierarchicalresourcequotas.hnc.x-k8s.io,gpudeviceclasses.gpu.tally.dev,"
      "gpudevices.gpu.tally.dev,virtualmachineinstances.kubevirt.io,organizations.kube-dc.com";
  std::string before, after;
  // The objects must not move between the two reads: read the snapshot, run
  // live, and compare only when a second snapshot equals the first.
  const std::string tallyctl = TALLYCTL_BINARY;
  const std::string live = " --kubeconfig " + cluster().kubeconfig();
  const std::string offline = " --snapshot " + snapshot;
  const std::string now = " --now 2026-12-01T00:00:00Z";
  struct Command {
    std::string args;
    bool failsWithoutLedger;
  };
  const std::vector<Command> commands = {{"report -o json" + now, false},
                                         {"report -o table" + now, false},
                                         {"plan --node-mode gpu-a-0=vm-vgpu -o json" + now, true},
                                         {"options -n acme-ml -o json" + now, false},
                                         {"options -n beta" + now, false},
                                         {"audit -o json" + now, true}};
  for (int attempt = 0; attempt < 5; ++attempt) {
    before = kubectl("get " + kinds + " -A -o json", &rc);
    ASSERT_EQ(rc, 0) << before;
    std::ofstream(snapshot) << before;
    std::vector<std::pair<std::string, std::string>> outputs;
    for (const auto& c : commands) {
      int liveRc = 0, offlineRc = 0;
      std::string liveOut = runCommand(tallyctl + " " + c.args + live + " 2>/dev/null", &liveRc);
      std::string offlineOut = runCommand(tallyctl + " " + c.args + offline + " 2>/dev/null", &offlineRc);
      EXPECT_EQ(liveRc, offlineRc) << c.args;
      outputs.emplace_back(liveOut, offlineOut);
    }
    after = kubectl("get " + kinds + " -A -o json", &rc);
    if (after != before) continue;
    for (std::size_t i = 0; i < commands.size(); ++i) {
      EXPECT_EQ(outputs[i].first, outputs[i].second) << "tallyctl " << commands[i].args;
      EXPECT_FALSE(outputs[i].first.empty()) << "tallyctl " << commands[i].args;
    }
    EXPECT_NE(outputs[0].first.find("\"pool\":\"h200\""), std::string::npos) << outputs[0].first;
    EXPECT_NE(outputs[3].first.find("\"class\":\"h200\""), std::string::npos) << outputs[3].first;
    std::filesystem::remove(snapshot);
    return;
  }
  FAIL() << "the objects kept changing between the reads";
}

TEST(Catalog, TallyctlOptionsLiveAgreesWithTheEndpoint) {
  int rc = 0;
  for (const std::string ns : {"acme-ml", "beta", "capped"}) {
    Answer endpoint = options(ns, ordererToken);
    ASSERT_EQ(endpoint.status, 200) << endpoint.body;
    // The tenants here live in bare namespaces; the controller runs with
    // --unorganized-gpu-namespaces=allow (harness), and tallyctl is told the same.
    std::string live =
        runCommand(std::string(TALLYCTL_BINARY) + " options -o json -n " + ns +
                       " --unorganized-gpu-namespaces=allow --kubeconfig " + cluster().kubeconfig() + " 2>/dev/null",
                   &rc);
    EXPECT_EQ(rc, 0);
    // Both are catalogOptions of the same objects (the controller's clock may
    // differ, but nothing the catalogue reads depends on it here).
    EXPECT_EQ(trimmed(endpoint.body), trimmed(live)) << ns;
  }
}

}  // namespace
}  // namespace tally::runtime::e2e
