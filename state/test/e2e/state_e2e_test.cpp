// The cluster state against a real kube-apiserver (e2e/cluster/up): every
// registered kind's informer syncs, and the published snapshot follows nodes
// and GPU pods as they are created and deleted.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tally/state/testing/recording_extension.hpp"
#include "tally/runtime/testing/e2e/cluster.hpp"
#include "tally/state/informers.hpp"
#include "tally/state/writer.hpp"

namespace tally::state {
namespace {

using namespace std::chrono_literals;
using runtime::e2e::Cluster;

constexpr const char* kGpu = "nvidia.com/GH100_H200_SXM_141GB";

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "state-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(Cluster::instance().up(name)) << "e2e/cluster/up --name " << name << " failed";
  }
  void TearDown() override { Cluster::instance().down(); }
};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

std::string nodeJson(const std::string& name) {
  return R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + name +
         R"(","annotations":{"kwok.x-k8s.io/node":"fake"}},"status":{"allocatable":{"cpu":"32","memory":"256Gi",")" +
         kGpu + R"(":"8"},"capacity":{"cpu":"32","memory":"256Gi",")" + kGpu +
         R"(":"8"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}})";
}

std::string podJson(const std::string& name, const std::string& node, int gpus, const std::string& ns = "state-e2e") {
  const std::string n = std::to_string(gpus);
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" + ns +
         R"("},"spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"c","image":"busybox","resources":{"requests":{")" + kGpu + R"(":")" + n +
         R"("},"limits":{")" + kGpu + R"(":")" + n + R"("}}}]}})";
}

// A pod that asks for CPU and memory only.
std::string cpuPodJson(const std::string& name, const std::string& node, const std::string& ns) {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" + ns +
         R"("},"spec":{"nodeName":")" + node +
         R"(","containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}})";
}

runtime::DeleteOptions gracePeriodZero() {
  runtime::DeleteOptions o;
  o.gracePeriodSeconds = 0;
  return o;
}

TEST(StateE2E, SnapshotsFollowNodesAndPodsCreatedAndDeleted) {
  auto client = Cluster::instance().client();
  ASSERT_NE(client, nullptr);
  auto ns = client->create(runtime::Resource::core("namespaces"),
                           R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"state-e2e"}})");
  ASSERT_TRUE(ns) << ns.error().describe();

  SourceOptions sources;  // every kind the defaults enable, built-ins over protobuf
  testing::RecordingExtension pods;
  Writer::Options wo;
  wo.watched = watchedKinds(sources);
  wo.observers = {&pods};
  wo.extensions = {&pods};
  Writer writer(wo);
  Informers informers(client, writer, sources);
  writer.start();
  informers.start();

  auto snapshot = [&] { return writer.snapshots().read(); };
  ASSERT_TRUE(eventually([&] { return snapshot()->ready(); }, 60s)) << snapshot()->unsyncedCaches();

  auto node = client->create(runtime::Resource::core("nodes"), nodeJson("state-e2e-n1"));
  ASSERT_TRUE(node) << node.error().describe();
  ASSERT_TRUE(eventually([&] {
    auto s = snapshot();
    auto it = s->cluster().nodes.find("state-e2e-n1");
    return it != s->cluster().nodes.end() && it->second.allocatable.get(kGpu) == 8;
  })) << "the node never reached the snapshot";

  for (const char* name : {"gpu-a", "gpu-b"}) {
    auto pod = client->create(runtime::Resource::core("pods", "state-e2e"), podJson(name, "state-e2e-n1", 3));
    ASSERT_TRUE(pod) << pod.error().describe();
  }
  ASSERT_TRUE(eventually([&] { return snapshot()->usage.nodeUsed("state-e2e-n1", kGpu) == 6; }))
      << "used: " << snapshot()->usage.nodeUsed("state-e2e-n1", kGpu);
  EXPECT_EQ(*snapshot()->part<testing::RecordingExtension::Keys>(),
            (testing::RecordingExtension::Keys{"state-e2e/gpu-a", "state-e2e/gpu-b"}));

  auto gone = client->remove(runtime::Resource::core("pods", "state-e2e"), "gpu-a", gracePeriodZero());
  ASSERT_TRUE(gone) << gone.error().describe();
  ASSERT_TRUE(eventually([&] { return snapshot()->usage.nodeUsed("state-e2e-n1", kGpu) == 3; }))
      << "used: " << snapshot()->usage.nodeUsed("state-e2e-n1", kGpu);
  EXPECT_EQ(*snapshot()->part<testing::RecordingExtension::Keys>(),
            (testing::RecordingExtension::Keys{"state-e2e/gpu-b"}));

  auto nodeGone = client->remove(runtime::Resource::core("nodes"), "state-e2e-n1");
  ASSERT_TRUE(nodeGone) << nodeGone.error().describe();
  EXPECT_TRUE(eventually([&] { return !snapshot()->cluster().nodes.contains("state-e2e-n1"); }))
      << "the deleted node stayed in the snapshot";
  EXPECT_TRUE(snapshot()->ready());

  informers.stop();
  writer.stop();
}

// The informers' stores keep identities only and the writer no pod that asks
// for no GPU: pods listed at start and pods watched later, of both kinds, still
// count for the sync, and the snapshot follows exactly the GPU pods.
TEST(StateE2E, PodsThatAskForNoGpuCountForTheSyncButOnlyGpuPodsAreHeld) {
  auto client = Cluster::instance().client();
  ASSERT_NE(client, nullptr);
  const std::string ns = "state-e2e-cpu";
  const auto pods = runtime::Resource::core("pods", ns);
  ASSERT_TRUE(client->create(runtime::Resource::core("namespaces"),
                             R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")" + ns + R"("}})"));
  ASSERT_TRUE(client->create(runtime::Resource::core("nodes"), nodeJson("state-e2e-n2")));
  ASSERT_TRUE(client->create(pods, podJson("listed-gpu", "state-e2e-n2", 1, ns)));
  ASSERT_TRUE(client->create(pods, cpuPodJson("listed-cpu", "state-e2e-n2", ns)));

  SourceOptions sources;
  testing::RecordingExtension recorded;
  Writer::Options wo;
  wo.watched = watchedKinds(sources);
  wo.observers = {&recorded};
  wo.extensions = {&recorded};
  Writer writer(wo);
  Informers informers(client, writer, sources);
  writer.start();
  informers.start();
  auto snapshot = [&] { return writer.snapshots().read(); };
  auto held = [&] {
    testing::RecordingExtension::Keys keys;
    for (const auto& k : *snapshot()->part<testing::RecordingExtension::Keys>()) {
      if (k.starts_with(ns + "/")) keys.insert(k);
    }
    return keys;
  };
  auto used = [&] { return snapshot()->usage.nodeUsed("state-e2e-n2", kGpu); };
  ASSERT_TRUE(eventually([&] { return snapshot()->ready(); }, 60s)) << snapshot()->unsyncedCaches();
  EXPECT_TRUE(eventually([&] { return used() == 1; })) << "used: " << used();
  EXPECT_EQ(held(), (testing::RecordingExtension::Keys{ns + "/listed-gpu"}));

  ASSERT_TRUE(client->create(pods, cpuPodJson("watched-cpu", "state-e2e-n2", ns)));
  ASSERT_TRUE(client->create(pods, podJson("watched-gpu", "state-e2e-n2", 2, ns)));
  EXPECT_TRUE(eventually([&] { return used() == 3; })) << "used: " << used();
  EXPECT_EQ(held(), (testing::RecordingExtension::Keys{ns + "/listed-gpu", ns + "/watched-gpu"}));

  for (const char* name : {"listed-gpu", "listed-cpu", "watched-cpu"}) {
    ASSERT_TRUE(client->remove(pods, name, gracePeriodZero()));
  }
  EXPECT_TRUE(eventually([&] { return used() == 2; })) << "used: " << used();
  EXPECT_TRUE(eventually([&] { return held() == testing::RecordingExtension::Keys{ns + "/watched-gpu"}; }));
  EXPECT_TRUE(snapshot()->ready());

  informers.stop();
  writer.stop();
}

// A ledger record as a JSON string (for a ConfigMap's data).
std::string recordValue(const std::string& id, const std::string& state) {
  return "\"apiVersion: operations.kube-dc.com/v1alpha1\\nkind: GPUReservationRecord\\nmetadata:\\n  id: " + id +
         "\\nspec:\\n  organization: acme\\n  project: \\\"\\\"\\n  profileId: h200\\n  devices: 1\\n  state: " +
         state +
         "\\n  requestedAt: \\\"2026-09-20T09:00:00Z\\\"\\n  startsAt: \\\"2026-10-01T00:00:00Z\\\"\\n"
         "  addonId: gpu-h200-reserved\\n  billingReference: OPS-1\\n\"";
}

std::string ledgerConfigMap(const std::string& data, const std::string& resourceVersion = "") {
  return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ledger","namespace":"state-e2e-ledger")" +
         (resourceVersion.empty() ? std::string() : R"(,"resourceVersion":")" + resourceVersion + "\"") +
         R"(},"data":{)" + data + "}}";
}

TEST(StateE2E, TheLedgerConfigMapIsWatchedWithItsHistoryAndItsDeletionKeepsTheLastRevision) {
  auto client = Cluster::instance().client();
  ASSERT_NE(client, nullptr);
  const auto configMaps = runtime::Resource::core("configmaps", "state-e2e-ledger");
  ASSERT_TRUE(client->create(runtime::Resource::core("namespaces"),
                             R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"state-e2e-ledger"}})"));
  ASSERT_TRUE(
      client->create(configMaps, ledgerConfigMap(R"("gpu-res-1.yaml":)" + recordValue("gpu-res-1", "pending") +
                                                 R"(,"gpu-res-2.yaml":)" + recordValue("gpu-res-2", "pending"))));

  SourceOptions sources;
  sources.ledgerConfigMap = codec::BillingPlansLocation{"state-e2e-ledger", "ledger"};
  Writer::Options wo;
  wo.watched = {model::Kind::Ledger};
  Writer writer(wo);
  Informers informers(client, writer, sources);
  writer.start();
  informers.start();
  auto ledger = [&] { return writer.snapshots().read()->cluster().ledger; };
  ASSERT_TRUE(eventually([&] { return ledger().records.size() == 2; })) << ledger().records.size();
  EXPECT_EQ(ledger().records[0].source, "gpu-res-1.yaml");

  // gpu-res-1 deleted from the ConfigMap: a vanished record, in the model.
  ASSERT_TRUE(client->update(configMaps, "ledger",
                             ledgerConfigMap(R"("gpu-res-2.yaml":)" + recordValue("gpu-res-2", "pending"))));
  ASSERT_TRUE(eventually([&] { return ledger().records.size() == 1; }));
  ASSERT_EQ(ledger().history.size(), 1u);
  EXPECT_EQ(ledger().history[0].id, "gpu-res-1");
  EXPECT_EQ(ledger().history[0].source, "gpu-res-1.yaml");

  // The ConfigMap deleted: the last revision stays, with the error.
  ASSERT_TRUE(client->remove(configMaps, "ledger"));
  ASSERT_TRUE(eventually([&] { return ledger().readError.has_value(); }));
  EXPECT_EQ(ledger().records.size(), 1u);
  EXPECT_EQ(ledger().history.size(), 1u);
  EXPECT_NE(ledger().readError->message.find("deleted"), std::string::npos) << ledger().readError->message;

  informers.stop();
  writer.stop();
}

}  // namespace
}  // namespace tally::state
