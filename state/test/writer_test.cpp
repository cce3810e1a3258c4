#include "tally/state/writer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tally/model/testing/fixtures.hpp"
#include "tally/state/testing/recording_extension.hpp"

namespace tally::state {
namespace {

using namespace std::chrono_literals;
using model::testing::allocated;
using model::testing::draClaim;
using model::testing::draClass;
using model::testing::draNode;
using model::testing::draSlice;
using model::testing::gpuNode;
using model::testing::gpuPod;
using model::testing::kH200;
using model::testing::ns;
using model::testing::passthroughClass;
using testing::RecordingExtension;

Writer::Options withExtension(RecordingExtension& ext, std::set<model::Kind> watched = {}) {
  Writer::Options o;
  o.watched = std::move(watched);
  o.observers = {&ext};
  o.extensions = {&ext};
  return o;
}

TEST(Writer, AFreshWriterPublishesAnEmptySnapshotThatIsReadyWhenNothingIsWatched) {
  Writer writer({});
  auto snap = writer.snapshots().read();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->generation, 1u);
  EXPECT_TRUE(snap->ready());
  EXPECT_TRUE(snap->cluster().nodes.empty());
  EXPECT_EQ(snap->part<RecordingExtension::Keys>(), nullptr);
}

TEST(Writer, WatchedKindsAreUnsyncedUntilMarkedAndTheReasonNamesThem) {
  Writer writer(Writer::Options{.watched = {model::Kind::Node, model::Kind::Pod}});
  {
    auto snap = writer.snapshots().read();
    EXPECT_FALSE(snap->ready());
    EXPECT_EQ(snap->unsynced, (std::vector<model::Kind>{model::Kind::Node, model::Kind::Pod}));
    EXPECT_EQ(snap->unsyncedCaches(), "the Node, Pod caches are not synced yet");
    EXPECT_FALSE(snap->cluster().synced(model::Kind::Node));
  }
  writer.setSynced(model::Kind::Node, true);
  writer.flush();
  EXPECT_EQ(writer.snapshots().read()->unsyncedCaches(), "the Pod cache is not synced yet");
  writer.setSynced(model::Kind::Pod, true);
  writer.flush();
  EXPECT_TRUE(writer.snapshots().read()->ready());
  EXPECT_TRUE(writer.snapshots().read()->cluster().synced(model::Kind::Pod));
}

// The base runs with no ledger flag: a kind no source reads is not
// configured, which the audit never calls stale (model/sources.hpp).
TEST(Writer, AKindNoSourceReadsIsNotConfiguredAndAWatchedOneIs) {
  Writer writer(Writer::Options{.watched = {model::Kind::Node}});
  writer.setSynced(model::Kind::Node, true);
  writer.flush();
  auto snap = writer.snapshots().read();
  EXPECT_TRUE(snap->cluster().synced(model::Kind::Ledger));
  EXPECT_FALSE(snap->cluster().configured(model::Kind::Ledger));
  EXPECT_FALSE(snap->cluster().configured(model::Kind::Organization));
  EXPECT_TRUE(snap->cluster().configured(model::Kind::Node));
}

TEST(Writer, SnapshotsReflectUpsertsAndRemovesOfNodesAndPods) {
  RecordingExtension ext;
  Writer writer(withExtension(ext));
  writer.upsert(ns("t"));
  writer.upsert(gpuNode("n1"));
  writer.upsert(gpuPod("t", "p1", kH200, 3, "n1"));
  writer.upsert(gpuPod("t", "pending", kH200, 2));
  writer.flush();
  {
    auto snap = writer.snapshots().read();
    EXPECT_TRUE(snap->cluster().nodes.contains("n1"));
    EXPECT_TRUE(snap->cluster().pods.empty()) << "the base holds no pods: their sums are in usage";
    EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 3);
    EXPECT_EQ(*snap->part<RecordingExtension::Keys>(), (RecordingExtension::Keys{"t/p1", "t/pending"}));
    EXPECT_EQ(ext.lastGeneration.load(), snap->generation);
  }
  writer.remove(model::Kind::Pod, "t", "p1");
  writer.flush();
  {
    auto snap = writer.snapshots().read();
    EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 0);
    EXPECT_EQ(*snap->part<RecordingExtension::Keys>(), (RecordingExtension::Keys{"t/pending"}));
  }
  writer.remove(model::Kind::Node, "", "n1");
  writer.flush();
  EXPECT_FALSE(writer.snapshots().read()->cluster().nodes.contains("n1"));
}

// What a pod requests of an extended resource never changes, so a pod that
// asks for no GPU is never held; an upsert of one under a held pod's name (it
// was deleted and created again while the watch was away) drops the old one.
TEST(Writer, APodThatAsksForNoGpuIsNotHeldAndReplacesAHeldPodOfItsName) {
  RecordingExtension ext;
  Writer writer(withExtension(ext));
  writer.upsert(ns("t"));
  writer.upsert(gpuNode("n1"));
  writer.upsert(gpuPod("t", "gpu", kH200, 2, "n1"));
  writer.upsert(gpuPod("t", "cpu", kH200, 0, "n1"));
  writer.flush();
  {
    auto snap = writer.snapshots().read();
    EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 2);
    EXPECT_EQ(*snap->part<RecordingExtension::Keys>(), (RecordingExtension::Keys{"t/gpu"}));
  }
  writer.upsert(gpuPod("t", "gpu", kH200, 0, "n1"));
  writer.flush();
  auto snap = writer.snapshots().read();
  EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 0);
  EXPECT_TRUE(snap->part<RecordingExtension::Keys>()->empty());
  EXPECT_EQ(writer.stats().eventsApplied, 5u) << "every upsert reached the writer, as a removal or not";
}

TEST(Writer, PodOnlyChangesShareTheClusterAndUnchangedUpsertsAreSkipped) {
  Writer writer({});
  writer.upsert(ns("t"));
  writer.upsert(gpuNode("n1"));
  writer.flush();
  const auto copies = writer.stats().clusterCopies;
  const model::Cluster* base = &writer.snapshots().read()->cluster();
  writer.upsert(gpuPod("t", "p", kH200, 1, "n1"));
  writer.upsert(gpuNode("n1"));  // a heartbeat: decodes to what the cache holds
  writer.flush();
  EXPECT_EQ(&writer.snapshots().read()->cluster(), base);
  EXPECT_FALSE(writer.stats().lastCopiedCluster);
  EXPECT_EQ(writer.stats().clusterCopies, copies);
  EXPECT_EQ(writer.stats().skippedUnchanged, 1u);
  writer.upsert(gpuNode("n1", model::NodeMode::VmPassthrough, kH200, 4));
  writer.flush();
  EXPECT_TRUE(writer.stats().lastCopiedCluster);
  EXPECT_NE(&writer.snapshots().read()->cluster(), base);
}

TEST(Writer, ClaimChangesShareTheClusterAndShowOnlyInTheSums) {
  Writer writer({});
  writer.upsert(ns("t"));
  writer.upsert(draClass());
  writer.upsert(draNode("dra-1"));
  writer.upsert(draSlice("dra-1-gpus", "dra-1", "dra-1", 4));
  writer.flush();
  const auto copies = writer.stats().clusterCopies;
  const model::Cluster* base = &writer.snapshots().read()->cluster();
  writer.upsert(allocated(draClaim("t", "c", "h200.example.com", 2), "dra-1", "dra-1", {"gpu-0", "gpu-1"}));
  writer.upsert(draClaim("t", "waiting", "h200.example.com", 1));
  writer.flush();
  auto snap = writer.snapshots().read();
  EXPECT_EQ(&snap->cluster(), base) << "a claim event copies no cluster";
  EXPECT_EQ(writer.stats().clusterCopies, copies);
  EXPECT_TRUE(snap->cluster().resourceClaims.empty());
  const std::string resource = draClass().resourceName;
  EXPECT_EQ(snap->usage.nodeUsed("dra-1", resource), 2);
  EXPECT_EQ(snap->usage.namespaceUsed("t", model::quotaKey(resource)), 3);
  EXPECT_EQ(snap->usage.pendingClaimUnits(snap->cluster(), snap->cluster().classes.at("h200-dra")), 1);
  EXPECT_EQ(snap->usage.poolFreeUnits(snap->cluster(), snap->cluster().classes.at("h200-dra")), 2);
  writer.remove(model::Kind::ResourceClaim, "t", "c");
  writer.flush();
  EXPECT_EQ(&writer.snapshots().read()->cluster(), base);
  EXPECT_EQ(writer.snapshots().read()->usage.nodeUsed("dra-1", resource), 0);
}

TEST(Writer, ExtensionsHearOfEveryRealChangeOfOtherKindsButNotOfRepeats) {
  RecordingExtension ext;
  Writer writer(withExtension(ext));
  writer.upsert(ns("t"));
  writer.upsert(gpuNode("n1"));
  writer.upsert(gpuPod("t", "p", kH200, 1, "n1"));  // pods go to podChanged only
  writer.flush();
  writer.upsert(gpuNode("n1"));  // unchanged
  writer.upsert(gpuNode("n1", model::NodeMode::VmPassthrough, kH200, 4));
  writer.remove(model::Kind::Node, "", "n1");
  writer.remove(model::Kind::Namespace, "", "t");
  writer.flush();
  EXPECT_EQ(ext.changed, (std::vector<std::string>{"Namespace:t", "Node:n1", "Node:n1", "Node:n1", "Namespace:t"}));
}

TEST(Writer, PostedTasksRunOnTheWriterInQueueOrderWithTheLiveIndex) {
  Writer writer({});
  writer.upsert(ns("t"));
  writer.upsert(gpuNode("n1"));
  writer.upsert(gpuPod("t", "p", kH200, 2));
  std::size_t podsSeen = 0;
  writer.post(
      [&](model::UsageIndex& index) {
        podsSeen = index.cluster().pods.size();
        index.assume(index.cluster().pods.at("t/p"), "n1");
      },
      false);
  writer.flush();
  EXPECT_EQ(podsSeen, 1u) << "the task ran after the upserts queued before it";
  auto snap = writer.snapshots().read();
  EXPECT_EQ(snap->assumedPlacements, 1u);
  EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 2);
}

TEST(Writer, TheThreadPublishesUrgentTasksAtOnceAndWakesForExtensionDeadlines) {
  RecordingExtension ext;
  Writer::Options o = withExtension(ext);
  o.publishInterval = 10'000ms;  // only urgency or a deadline gets a publication out
  Writer writer(o);
  writer.start();
  const auto before = writer.snapshots().read()->generation;
  writer.post([&](model::UsageIndex&) { ext.dueAt(Writer::Clock::now() + 50ms); }, true);
  for (int i = 0; i < 200 && writer.snapshots().read()->generation == before; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_GT(writer.snapshots().read()->generation, before) << "an urgent task is published without the interval";
  for (int i = 0; i < 200 && ext.ticksDue.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ext.ticksDue.load(), 1) << "the writer woke for the extension's deadline";
  writer.stop();
  EXPECT_EQ(ext.stoppedCalls.load(), 1);
}

TEST(Writer, UpsertClusterQueuesEveryObjectOfAnOfflineSnapshot) {
  model::Cluster c;
  c.namespaces["t"] = ns("t");
  c.nodes["n1"] = gpuNode("n1");
  c.pods["t/p"] = gpuPod("t", "p", kH200, 5, "n1");
  c.permittedHostDevices = std::vector<model::PermittedHostDevice>{};
  Writer writer({});
  upsertCluster(writer, c);
  EXPECT_EQ(writer.queued(), 4u);
  writer.flush();
  auto snap = writer.snapshots().read();
  EXPECT_TRUE(snap->cluster().namespaces.contains("t"));
  EXPECT_EQ(snap->usage.nodeUsed("n1", kH200), 5);
  EXPECT_TRUE(snap->cluster().permittedHostDevices.has_value());
}

// SPEC 3.5, fail closed: the doors read each pool's gate from the snapshot.
// A pool whose status carries no decision is closed ("not audited yet"); a
// published open gate closes at once on the door's own snapshot when the
// operator pauses the pool, before the auditor writes again.
TEST(Writer, DoorsReadAPoolNoAuditorDecidedAsClosedAndAPauseAtOnce) {
  Writer writer({});
  model::DeviceClass undecided = passthroughClass("h200");
  undecided.gateDecided = false;
  writer.upsert(undecided);
  writer.flush();
  {
    const model::DeviceClass& cls = writer.snapshots().read()->cluster().classes.at("h200");
    EXPECT_FALSE(cls.gateOpen);
    EXPECT_NE(cls.gateReason.find("pool h200 is not audited yet"), std::string::npos) << cls.gateReason;
  }
  model::DeviceClass open = passthroughClass("h200");
  open.gateReason = "audit clean";
  writer.upsert(open);
  writer.flush();
  EXPECT_TRUE(writer.snapshots().read()->cluster().classes.at("h200").gateOpen);
  model::DeviceClass paused = open;
  paused.creationPaused = true;
  writer.upsert(paused);
  writer.flush();
  {
    const model::DeviceClass& cls = writer.snapshots().read()->cluster().classes.at("h200");
    EXPECT_FALSE(cls.gateOpen);
    EXPECT_NE(cls.gateReason.find("paused by the operator (spec.creationPaused)"), std::string::npos) << cls.gateReason;
  }
}

// Where no auditor runs, the doors evaluate the gate function themselves: a
// clean pool is open whatever its status says, and a pod that over-commits a
// node (it reached it around Tally) closes the pool on the next evaluation.
TEST(Writer, WithoutAnAuditorTheSnapshotCarriesTheGateTheAuditFunctionDecides) {
  Writer::Options o;
  o.gates = model::GateSource::Evaluated;
  o.gateEvaluationInterval = 0ms;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // see the next test
  Writer writer(o);
  model::DeviceClass undecided = passthroughClass("h200");
  undecided.gateDecided = false;
  writer.upsert(undecided);
  writer.upsert(ns("t"));
  model::Node node = gpuNode("n1");
  node.activeMode = node.expectedMode = model::NodeMode::VmPassthrough;
  writer.upsert(node);
  writer.upsert(gpuPod("t", "fits", kH200, 8, "n1"));
  writer.flush();
  {
    const model::DeviceClass& cls = writer.snapshots().read()->cluster().classes.at("h200");
    EXPECT_TRUE(cls.gateOpen) << cls.gateReason;
  }
  writer.upsert(gpuPod("t", "around", kH200, 1, "n1"));
  writer.flush();
  {
    const model::DeviceClass& cls = writer.snapshots().read()->cluster().classes.at("h200");
    EXPECT_FALSE(cls.gateOpen);
    EXPECT_NE(cls.gateReason.find("NodeOvercommitted"), std::string::npos) << cls.gateReason;
  }
  writer.remove(model::Kind::Pod, "t", "around");
  writer.flush();
  EXPECT_TRUE(writer.snapshots().read()->cluster().classes.at("h200").gateOpen)
      << "no auditor remembers the failure: it reopens when the finding clears";
}

// Under the default policy, GPU use in a namespace no Organization holds is a
// quantity no term attributes: the evaluated gate closes with the finding.
TEST(Writer, GpuUseOutsideEveryOrganizationClosesTheEvaluatedGate) {
  Writer::Options o;
  o.gates = model::GateSource::Evaluated;
  o.gateEvaluationInterval = 0ms;
  Writer writer(o);
  writer.upsert(passthroughClass("h200"));
  writer.upsert(ns("kube-system"));
  writer.upsert(ns("t"));
  model::Node node = gpuNode("n1");
  node.activeMode = node.expectedMode = model::NodeMode::VmPassthrough;
  writer.upsert(node);
  writer.upsert(gpuPod("kube-system", "probe", kH200, 1, "n1"));
  writer.flush();
  EXPECT_TRUE(writer.snapshots().read()->cluster().classes.at("h200").gateOpen)
      << "a system namespace's use is not a tenant's";
  writer.upsert(gpuPod("t", "stray", kH200, 1, "n1"));
  writer.flush();
  const model::DeviceClass& cls = writer.snapshots().read()->cluster().classes.at("h200");
  EXPECT_FALSE(cls.gateOpen);
  EXPECT_NE(cls.gateReason.find("UnorganizedGpuUse"), std::string::npos) << cls.gateReason;
  EXPECT_NE(cls.gateReason.find("namespace t "), std::string::npos) << cls.gateReason;
}

}  // namespace
}  // namespace tally::state
