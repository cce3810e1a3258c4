#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <random>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/extender/verbs.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;
using namespace tally::model::testing;

namespace {

model::Node snapshotsNode(const CacheWriter& writer, const std::string& name) {
  return writer.snapshots().read()->cluster().nodes.at(name);
}

wire::ExtenderArgs argsFor(const model::Pod& pod, std::vector<std::string> nodes) {
  wire::ExtenderArgs a;
  a.pod = pod;
  for (auto& n : nodes) a.nodeNames.push_back(a.ownedNames.emplace_back(std::move(n)));
  return a;
}

std::vector<state::Object> twoNodes() {
  return {passthroughClass(),
          ns("tenant-a"),
          gpuNode("full", model::NodeMode::VmPassthrough, kH200, 2),
          gpuNode("free"),
          gpuNode("pod-mode", model::NodeMode::PodHami, kH200, 8),
          gpuPod("tenant-a", "holder", kH200, 2, "full")};
}

}  // namespace

TEST(Filter, NodeWithFreeUnitsPassesFullNodeFailsWrongModeIsUnresolvable) {
  auto writer = loadedWriter(twoNodes());
  auto snap = writer->snapshots().read();
  DecisionTally tally;
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1),
                      {"full", "free", "pod-mode"});  // the result refers to its node names
  auto r = filterNodes(*snap, args, &tally);
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.passed.size(), 1u);
  EXPECT_EQ(r.passed[0], "free");
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].first, "full");
  EXPECT_NE(r.failed[0].second.find("0 of 2"), std::string::npos) << r.failed[0].second;
  ASSERT_EQ(r.unresolvable.size(), 1u);
  EXPECT_EQ(r.unresolvable[0].first, "pod-mode");
  EXPECT_EQ(tally.total(), 3u);
  EXPECT_EQ(tally.count(FilterResultKind::Failed, model::Code::NodeInsufficient), 1u);
  EXPECT_EQ(tally.count(FilterResultKind::Pass, std::nullopt), 1u);
  EXPECT_EQ(tally.count(FilterResultKind::Unresolvable, model::Code::NodeNotServed), 1u);
}

namespace {

// A writer watching Nodes and GPUDevices of which only Nodes have synced.
std::unique_ptr<CacheWriter> halfSyncedWriter() {
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  o.watched = {model::Kind::Node, model::Kind::GpuDevice};
  auto writer = std::make_unique<CacheWriter>(o);
  for (auto& obj : twoNodes()) writer->upsert(obj);
  writer->setSynced(model::Kind::Node, true);
  writer->flush();
  return writer;
}

}  // namespace

TEST(Filter, UnsyncedCachesAnswerWithAnErrorNeverAllNodesPass) {
  auto writer = halfSyncedWriter();
  auto snap = writer->snapshots().read();
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"free"});  // the result refers to its node names
  auto r = filterNodes(*snap, args);
  EXPECT_TRUE(r.passed.empty());
  EXPECT_NE(r.error.find("GPUDevice"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.find("Node,"), std::string::npos);
}

TEST(Filter, NodeUnknownToTheCacheFailsResolvably) {
  auto writer = loadedWriter(twoNodes());
  auto snap = writer->snapshots().read();
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"brand-new"});  // the result refers to its node names
  auto r = filterNodes(*snap, args);
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_NE(r.failed[0].second.find("not in tally-extender's cache"), std::string::npos);
}

TEST(Filter, AssumedPlacementIsSeenByTheNextFilter) {
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));  // pending, seen by the pod watch
  auto writer = loadedWriter(objects);
  auto assumed = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  EXPECT_EQ(assumed.get(), AssumeOutcome::Recorded);
  auto snap = writer->snapshots().read();
  EXPECT_EQ(snap->assumedPlacements, 1u);
  auto args = argsFor(gpuPod("tenant-a", "second", kH200, 1), {"free"});  // the result refers to its node names
  auto r = filterNodes(*snap, args);
  EXPECT_TRUE(r.passed.empty());
  ASSERT_EQ(r.failed.size(), 1u);
}

TEST(Filter, ForgottenAssumptionFreesTheUnits) {
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));
  auto writer = loadedWriter(objects);
  auto assumed = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->forget("uid-first");
  writer->flush();
  auto snap = writer->snapshots().read();
  EXPECT_EQ(snap->assumedPlacements, 0u);
  auto args = argsFor(gpuPod("tenant-a", "second", kH200, 1), {"free"});  // the result refers to its node names
  auto r = filterNodes(*snap, args);
  EXPECT_EQ(r.passed.size(), 1u);
}

namespace {

// twoNodes() with a pending 8-unit pod "first" (uid-1), assumptions held `ttl`.
std::unique_ptr<CacheWriter> writerWithPendingPod(std::chrono::milliseconds ttl) {
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  o.assumeTtl = ttl;
  return loadedWriter(objects, o);
}

}  // namespace

// Events arriving while a publication is pending wait for it without waking
// the writer: a watch delivering thousands of events a second would otherwise
// wake it for each, to find nothing to do yet. An urgent event (a bind's
// assumption) still wakes it at once.
TEST(Snapshot, EventsQueuedBeforeAPublicationIsDueDoNotWakeTheWriter) {
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  o.publishInterval = std::chrono::milliseconds(400);
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));
  auto writer = loadedWriter(objects, o);
  writer->start();
  const auto publishesBefore = writer->stats().publishes;
  for (int i = 0; i < 200; ++i) {
    // A pod event each, the writer waiting for its publication to fall due.
    writer->upsert(gpuPod("tenant-a", "p" + std::to_string(i), kH200, 1));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const auto stats = writer->stats();
  // The first event woke it; the 400 ms timer may have fired once since.
  EXPECT_LE(stats.writerWakeups, 4u) << "the writer woke for events it was not waiting for";
  EXPECT_LE(stats.publishes, publishesBefore + 1);
  auto assumed = writer->assume("tenant-a", "first", "uid-first", "free");
  ASSERT_EQ(assumed.wait_for(std::chrono::milliseconds(200)), std::future_status::ready)
      << "an urgent event waited for the publication timer";
  EXPECT_EQ(assumed.get(), AssumeOutcome::Recorded);
  writer->stop();
  writer->flush();
  EXPECT_GE(writer->stats().eventsApplied, 200u) << "queued events were lost";
}

TEST(Filter, AssumptionExpiresAfterItsTtl) {
  auto writer = writerWithPendingPod(std::chrono::milliseconds(1));
  auto assumed = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  writer->flush();
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, 0u);
  EXPECT_EQ(writer->stats().assumptionsExpired, 1u);
}

// A pod assumed, forgotten and assumed again keeps its second deadline: the
// first one coming up must not expire it.
TEST(Filter, AssumptionMadeAgainExpiresAtItsNewDeadline) {
  auto writer = writerWithPendingPod(std::chrono::milliseconds(400));
  auto first = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  writer->forget("uid-first");
  writer->flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  auto second = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  EXPECT_EQ(second.get(), AssumeOutcome::Recorded);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past the first deadline, not the second
  writer->flush();
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, 1u);
  EXPECT_EQ(writer->stats().assumptionsExpired, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  writer->flush();
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, 0u);
  EXPECT_EQ(writer->stats().assumptionsExpired, 1u);
}

TEST(Filter, WatchConfirmingTheBindDropsTheAssumption) {
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));
  auto writer = loadedWriter(objects);
  auto assumed = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  writer->upsert(gpuPod("tenant-a", "first", kH200, 8, "free"));
  writer->flush();
  auto snap = writer->snapshots().read();
  EXPECT_EQ(snap->assumedPlacements, 0u);
  EXPECT_EQ(snap->usage.nodeUsed("free", kH200), 8);
}

namespace {
CacheWriter::Options waitingForPods(std::chrono::milliseconds wait) {
  CacheWriter::Options o = fixtureOptions();
  o.bindPodWait = wait;
  return o;
}
bool ready(std::future<AssumeOutcome>& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
model::Pod withUid(model::Pod p, std::string uid) {
  p.uid = std::move(uid);
  return p;
}
}  // namespace

// A pod the watch never delivers: the bind waits --bind-pod-wait for it,
// then is refused as not seen (the scheduler retries), counted.
TEST(Filter, UnknownPodCannotBeAssumed) {
  auto writer = loadedWriter(twoNodes(), waitingForPods(std::chrono::milliseconds(50)));
  auto assumed = writer->assume("tenant-a", "ghost", "uid-g", "free");
  writer->flush();
  EXPECT_FALSE(ready(assumed)) << "refused before its wait was over";
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  writer->flush();
  ASSERT_TRUE(ready(assumed));
  EXPECT_EQ(assumed.get(), AssumeOutcome::PodUnknown);
  EXPECT_EQ(writer->stats().bindPodWaitsTimedOut, 1u);
  EXPECT_EQ(writer->stats().bindPodArrivals, 0u);
  // Without a wait the refusal is at once.
  auto now = loadedWriter(twoNodes(), waitingForPods(std::chrono::milliseconds(0)));
  auto refused = now->assume("tenant-a", "ghost", "uid-g", "free");
  now->flush();
  ASSERT_TRUE(ready(refused));
  EXPECT_EQ(refused.get(), AssumeOutcome::PodUnknown);
}

// kube-scheduler's watch delivered the pod before the extender's: the bind
// waits for the pod's event, not for a timer, and then holds its units.
TEST(Filter, ABindWaitsForAPodTheWatchHasNotDeliveredYet) {
  auto writer = loadedWriter(twoNodes(), waitingForPods(std::chrono::seconds(30)));
  auto assumed = writer->assume("tenant-a", "late", "uid-late", "free");
  writer->flush();
  EXPECT_FALSE(ready(assumed));
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, 0u);
  writer->upsert(gpuPod("tenant-a", "late", kH200, 8));
  writer->flush();
  ASSERT_TRUE(ready(assumed)) << "the pod's event did not decide the bind";
  EXPECT_EQ(assumed.get(), AssumeOutcome::Recorded);
  auto snap = writer->snapshots().read();
  EXPECT_EQ(snap->assumedPlacements, 1u);
  EXPECT_EQ(snap->usage.nodeUsed("free", kH200), 8);
  EXPECT_EQ(writer->stats().bindPodArrivals, 1u);
  EXPECT_EQ(writer->stats().bindPodWaitsTimedOut, 0u);
}

// The cache still holds the pod a new one of the same name replaced: the
// bind for the new uid waits for the new pod, never binds the old one's units.
TEST(Filter, ABindForAReplacedPodWaitsForTheNewUid) {
  auto objects = twoNodes();
  objects.push_back(withUid(gpuPod("tenant-a", "job", kH200, 8), "uid-old"));
  auto writer = loadedWriter(objects, waitingForPods(std::chrono::seconds(30)));
  auto assumed = writer->assume("tenant-a", "job", "uid-new", "free");
  writer->flush();
  EXPECT_FALSE(ready(assumed));
  writer->upsert(withUid(gpuPod("tenant-a", "job", kH200, 4), "uid-old"));  // the old one, changed
  writer->flush();
  EXPECT_FALSE(ready(assumed));
  writer->upsert(withUid(gpuPod("tenant-a", "job", kH200, 8), "uid-new"));
  writer->flush();
  ASSERT_TRUE(ready(assumed));
  EXPECT_EQ(assumed.get(), AssumeOutcome::Recorded);
}

// The pod arrives, but other placements took the node's units meanwhile: the
// bind is decided as any other, and refused.
TEST(Filter, APodThatArrivesWhereItNoLongerFitsIsRefused) {
  auto objects = twoNodes();
  objects.push_back(gpuPod("tenant-a", "first", kH200, 8));
  auto writer = loadedWriter(objects, waitingForPods(std::chrono::seconds(30)));
  auto late = writer->assume("tenant-a", "late", "uid-late", "free");
  auto first = writer->assume("tenant-a", "first", "uid-first", "free");
  writer->flush();
  ASSERT_TRUE(ready(first));
  EXPECT_EQ(first.get(), AssumeOutcome::Recorded);
  writer->upsert(gpuPod("tenant-a", "late", kH200, 8));
  writer->flush();
  ASSERT_TRUE(ready(late));
  EXPECT_EQ(late.get(), AssumeOutcome::NoLongerFits);
}

TEST(Prioritize, BinPackPrefersTheFullerNodeSpreadTheEmptier) {
  auto objects = twoNodes();
  objects.push_back(gpuNode("half"));
  objects.push_back(gpuPod("tenant-a", "h1", kH200, 4, "half"));
  auto writer = loadedWriter(objects);
  auto snap = writer->snapshots().read();
  auto pod = gpuPod("tenant-a", "new", kH200, 1);
  auto packed = prioritizeNodes(*snap, argsFor(pod, {"half", "free"}), model::ScoreStrategy::BinPack);
  ASSERT_EQ(packed.size(), 2u);
  EXPECT_GT(packed[0].score, packed[1].score);
  auto spread = prioritizeNodes(*snap, argsFor(pod, {"half", "free"}), model::ScoreStrategy::Spread);
  EXPECT_LT(spread[0].score, spread[1].score);
  for (const auto& p : packed) EXPECT_TRUE(p.score >= 0 && p.score <= 10);
}

TEST(Preempt, KeepsOnlyVictimsNeededAndDropsNodesWhereNothingHelps) {
  std::vector<state::Object> objects = {passthroughClass(), ns("tenant-a"),
                                        gpuNode("n1", model::NodeMode::VmPassthrough, kH200, 4),
                                        gpuNode("n2", model::NodeMode::VmPassthrough, kH200, 2)};
  objects.push_back(gpuPod("tenant-a", "a", kH200, 2, "n1"));
  objects.push_back(gpuPod("tenant-a", "b", kH200, 2, "n1"));
  objects.push_back(gpuPod("tenant-a", "c", kH200, 1, "n2"));
  auto writer = loadedWriter(objects);
  auto snap = writer->snapshots().read();
  wire::PreemptionArgs args;
  args.pod = gpuPod("tenant-a", "big", kH200, 2);
  args.victims.push_back({"n1", {{"uid-a", "uid-b"}, 1}});
  args.victims.push_back({"n2", {{"uid-c"}, 0}});  // n2 serves 2: evicting c leaves 2 free, fits
  args.victims.push_back({"gone", {{"uid-x"}, 0}});
  auto r = preemptVictims(*snap, args);
  ASSERT_EQ(r.victims.size(), 2u);
  EXPECT_EQ(r.victims[0].first, "n1");
  EXPECT_EQ(r.victims[0].second.podUids, std::vector<std::string>{"uid-a"});
  EXPECT_EQ(r.victims[1].first, "n2");
  EXPECT_EQ(r.victims[1].second.podUids, std::vector<std::string>{"uid-c"});

  wire::PreemptionArgs tooBig;
  tooBig.pod = gpuPod("tenant-a", "huge", kH200, 4);
  tooBig.victims.push_back({"n2", {{"uid-c"}, 0}});
  EXPECT_TRUE(preemptVictims(*snap, tooBig).victims.empty());
}

// A publish after pod events shares the cluster copy and every FitTable block
// without a touched node; a node update the model cannot see (a heartbeat)
// changes nothing; a real node change copies the cluster again.
TEST(Snapshot, PodEventsShareTheClusterAndUntouchedFitBlocks) {
  auto writer = loadedWriter(syntheticCluster(1000, 2000, 4));
  const model::Cluster* before = &writer->snapshots().read()->cluster();
  writer->upsert(gpuPod("tenant-0", "extra", kH200, 1, "node-3"));
  writer->flush();
  auto stats = writer->stats();
  EXPECT_FALSE(stats.lastCopiedCluster);
  {
    auto snap = writer->snapshots().read();
    EXPECT_EQ(&snap->cluster(), before);
    EXPECT_EQ(snap->fit.blockCount(), 8u);  // 1000 rows, 128 a block
    EXPECT_EQ(stats.lastFitBlocksShared, 7u);
    EXPECT_EQ(snap->usage.nodeUsed("node-3", kH200), 3);  // 2 from the fixture + 1
    // The updated row decides like a fresh table would.
    auto fresh = model::FitTable::build(snap->cluster(), snap->usage);
    auto demand = model::podDemand(snap->cluster(), snap->usage, gpuPod("tenant-0", "probe", kH200, 6));
    for (const char* n : {"node-3", "node-4"}) {
      auto row = snap->fit.find(n);
      ASSERT_TRUE(row);
      EXPECT_EQ(snap->fit.filter(snap->cluster(), demand, *row).verdict,
                fresh.filter(snap->cluster(), demand, *fresh.find(n)).verdict)
          << n;
    }
  }
  model::Node same = snapshotsNode(*writer, "node-5");
  writer->upsert(same);
  writer->flush();
  EXPECT_EQ(writer->stats().skippedUnchanged, 1u);
  EXPECT_FALSE(writer->stats().lastCopiedCluster);
  same.unschedulable = true;
  writer->upsert(same);
  writer->flush();
  EXPECT_TRUE(writer->stats().lastCopiedCluster);
  EXPECT_EQ(writer->stats().clusterCopies, stats.clusterCopies + 1);
  auto snap = writer->snapshots().read();
  EXPECT_NE(&snap->cluster(), before);
  EXPECT_TRUE(snap->cluster().nodes.at("node-5").unschedulable);
}

TEST(Snapshot, OnlyChangedNodesGetNewPodRows) {
  auto writer = loadedWriter(syntheticCluster(10, 40, 2));
  auto before = podsOnNode(*writer->snapshots().read());
  writer->upsert(gpuPod("tenant-0", "extra", kH200, 1, "node-3"));
  writer->flush();
  EXPECT_EQ(writer->stats().lastRowsRebuilt, 1u);
  auto snap = writer->snapshots().read();
  EXPECT_EQ((*podsOnNode(*snap).find("node-3"))->size(), 5u);
  EXPECT_NE((*podsOnNode(*snap).find("node-3")).get(), (*before.find("node-3")).get());
  EXPECT_EQ((*podsOnNode(*snap).find("node-4")).get(), (*before.find("node-4")).get());
  EXPECT_NE(boundPod(*snap, "node-3", "uid-extra"), nullptr);
  // The rebuilt row shares the four pods that did not change: pointers copied,
  // not the pods.
  for (const auto& pod : **before.find("node-3")) EXPECT_EQ(boundPod(*snap, "node-3", pod->uid), pod.get());
}

namespace {

// A cluster mixing what filter tells apart: nodes full, half full and empty,
// of the wrong mode, cordoned and not Ready, with pods bound on them.
std::vector<state::Object> mixedCluster(std::mt19937_64& rng, std::size_t nodes) {
  std::vector<state::Object> objects = {passthroughClass(), ns("tenant-a"), ns("tenant-b")};
  for (std::size_t i = 0; i < nodes; ++i) {
    const std::string name = "n" + std::to_string(i) + (i % 3 == 0 ? "-a-long-name-beyond-sixteen-bytes" : "");
    model::Node node = gpuNode(name, rng() % 9 == 0 ? model::NodeMode::PodHami : model::NodeMode::VmPassthrough, kH200,
                               1 + static_cast<std::int64_t>(rng() % 8));
    if (rng() % 17 == 0) node.unschedulable = true;
    if (rng() % 19 == 0) node.ready = false;
    const std::int64_t used = static_cast<std::int64_t>(rng() % 9);
    objects.emplace_back(node);
    if (used > 0) {
      objects.emplace_back(gpuPod(rng() % 2 ? "tenant-a" : "tenant-b", "bound-" + name, kH200,
                                  std::min<std::int64_t>(used, node.allocatable.get(kH200)), name));
    }
  }
  return objects;
}

// Candidate lists as kube-scheduler sends them (the same order from a rotating
// start, a subset) and as it does not (shuffled, repeated, unknown names).
std::vector<std::string> candidates(std::mt19937_64& rng, const std::vector<std::string>& all, int shape) {
  std::vector<std::string> out;
  const std::size_t start = rng() % all.size();
  switch (shape % 4) {
    case 0:  // rotating start, every node
      for (std::size_t k = 0; k < all.size(); ++k) out.push_back(all[(start + k) % all.size()]);
      break;
    case 1:  // rotating start, some dropped by the scheduler's own filters
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (rng() % 5 != 0) out.push_back(all[(start + k) % all.size()]);
      }
      break;
    case 2:  // shuffled, with repeats
      out = all;
      std::shuffle(out.begin(), out.end(), rng);
      for (int k = 0; k < 10; ++k) out.push_back(out[rng() % out.size()]);
      break;
    default:  // names the cache does not know, spread through
      for (std::size_t k = 0; k < all.size(); ++k) {
        out.push_back(all[(start + k) % all.size()]);
        if (rng() % 11 == 0) out.push_back("unknown-" + std::to_string(rng() % 1000));
      }
  }
  return out;
}

// The snapshot's node names in a random order: the scheduler's order is not the cache's.
std::vector<std::string> shuffledNames(const ExtenderSnapshot& snap, std::mt19937_64& rng) {
  std::vector<std::string> all;
  for (const auto& [name, node] : snap.cluster().nodes) all.push_back(name);
  std::shuffle(all.begin(), all.end(), rng);
  return all;
}

}  // namespace

// filterResponse and prioritizeResponse write the answer in one pass; they must
// say byte for byte what the lists-then-encode path says, and tally the same,
// whatever the order of the candidates (the name lookup learns the order).
TEST(Filter, OnePassAnswersEqualTheListsEncoded) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    auto writer = loadedWriter(mixedCluster(rng, 300));
    auto snap = writer->snapshots().read();
    const std::vector<std::string> all = shuffledNames(*snap, rng);
    for (int round = 0; round < 40; ++round) {
      const std::int64_t units = 1 + static_cast<std::int64_t>(rng() % 8);
      auto args =
          argsFor(gpuPod(rng() % 2 ? "tenant-a" : "tenant-b", "new", kH200, units), candidates(rng, all, round));
      DecisionTally listed, streamed;
      const std::string expected = wire::encode(filterNodes(*snap, args, &listed));
      ASSERT_EQ(filterResponse(*snap, args, &streamed), expected) << "seed " << seed << " round " << round;
      ASSERT_EQ(streamed.counts, listed.counts) << "seed " << seed << " round " << round;
      ASSERT_EQ(listed.total(), args.nodeNames.size());
      // And both agree with the model asked node by node, by name.
      const model::PodDemand demand = model::podDemand(snap->cluster(), snap->usage, args.pod);
      std::uint32_t passes = 0, unknown = 0;
      for (std::string_view name : args.nodeNames) {
        auto node = snap->cluster().nodes.find(std::string(name));
        if (node == snap->cluster().nodes.end()) {
          ++unknown;
          continue;
        }
        passes += model::filterNode(snap->cluster(), snap->usage, demand, node->second).verdict == model::Verdict::Fits;
      }
      ASSERT_EQ(streamed.count(FilterResultKind::Pass, std::nullopt), passes) << "seed " << seed << " round " << round;
      ASSERT_EQ(streamed.count(FilterResultKind::Failed, std::nullopt), unknown)
          << "seed " << seed << " round " << round;
      for (auto strategy : {model::ScoreStrategy::BinPack, model::ScoreStrategy::Spread}) {
        ASSERT_EQ(prioritizeResponse(*snap, args, strategy), wire::encode(prioritizeNodes(*snap, args, strategy), true))
            << "seed " << seed << " round " << round;
      }
    }
  }
}

// Prioritize answered from what the filter of its cycle kept says byte for
// byte what scoring the filter's snapshot again says; anything but the same
// pod over exactly the passed candidates, with the same strategy, is scored
// anew.
TEST(Prioritize, FromTheFilterKeptEqualsScoringAgain) {
  const auto strategies = {model::ScoreStrategy::BinPack, model::ScoreStrategy::Spread};
  std::size_t answered = 0, listedSome = 0;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    auto writer = loadedWriter(mixedCluster(rng, 300));
    auto snap = writer->snapshots().read();
    const std::vector<std::string> all = shuffledNames(*snap, rng);
    FilterScores keep;  // reused, as the service reuses it
    for (int round = 0; round < 40; ++round) {
      const std::int64_t units = 1 + static_cast<std::int64_t>(rng() % 8);
      auto args =
          argsFor(gpuPod(rng() % 2 ? "tenant-a" : "tenant-b", "new", kH200, units), candidates(rng, all, round));
      for (auto strategy : strategies) {
        DecisionTally plain, keeping;
        const std::string expected = filterResponse(*snap, args, &plain);
        ASSERT_EQ(filterResponse(*snap, args, &keeping, keep, strategy), expected) << "seed " << seed;
        ASSERT_EQ(keeping.counts, plain.counts);
        ASSERT_TRUE(keep.kept);
        const wire::FilterResult lists = filterNodes(*snap, args);
        std::vector<std::string> passedNames(lists.passed.begin(), lists.passed.end());
        auto next = argsFor(args.pod, passedNames);  // kube-scheduler's prioritize of the cycle
        auto fromFilter = prioritizeFromFilter(keep, next, strategy);
        ASSERT_TRUE(fromFilter) << "seed " << seed << " round " << round;
        ASSERT_EQ(*fromFilter, prioritizeResponse(*snap, next, strategy)) << "seed " << seed << " round " << round;
        ++answered;
        listedSome += *fromFilter != "[]";

        const auto other =
            strategy == model::ScoreStrategy::BinPack ? model::ScoreStrategy::Spread : model::ScoreStrategy::BinPack;
        EXPECT_FALSE(prioritizeFromFilter(keep, next, other));
        auto anotherPod = next;
        anotherPod.pod.uid += "-replaced";
        EXPECT_FALSE(prioritizeFromFilter(keep, anotherPod, strategy));
        if (!passedNames.empty()) {
          auto fewer = argsFor(args.pod, {passedNames.begin() + 1, passedNames.end()});
          EXPECT_FALSE(prioritizeFromFilter(keep, fewer, strategy));
          auto more = passedNames;
          more.push_back(all[rng() % all.size()]);
          EXPECT_FALSE(prioritizeFromFilter(keep, argsFor(args.pod, more), strategy));
        }
        if (passedNames.size() > 1 && passedNames.front() != passedNames.back()) {  // lists may repeat a name
          std::swap(passedNames.front(), passedNames.back());
          EXPECT_FALSE(prioritizeFromFilter(keep, argsFor(args.pod, passedNames), strategy));
        }
      }
    }
  }
  EXPECT_EQ(answered, 3u * 40u * 2u);
  EXPECT_GT(listedSome, answered / 4) << "the clusters should give many candidates a score above 0";
}

// A filter that cannot decide (caches not synced) or answers Node objects
// keeps nothing, and what it kept before is not offered for its pod.
TEST(Prioritize, FilterKeepsNothingWhenItCannotDecide) {
  FilterScores keep;
  {
    auto writer = loadedWriter(twoNodes());
    auto snap = writer->snapshots().read();
    auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"full", "free"});
    (void)filterResponse(*snap, args, nullptr, keep, model::ScoreStrategy::BinPack);
    ASSERT_TRUE(keep.kept);
    EXPECT_TRUE(keep.sameCandidates({"free"}));
    args.fromNodeList = true;
    (void)filterResponse(*snap, args, nullptr, keep, model::ScoreStrategy::BinPack);
    EXPECT_FALSE(keep.kept);
  }
  auto writer = halfSyncedWriter();
  auto snap = writer->snapshots().read();
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"free"});
  (void)filterResponse(*snap, args, nullptr, keep, model::ScoreStrategy::BinPack);
  EXPECT_FALSE(keep.kept);
  EXPECT_FALSE(prioritizeFromFilter(keep, args, model::ScoreStrategy::BinPack));
}

TEST(Filter, OnePassAnswerPassesAndRefusesWhatTheModelSays) {
  auto writer = loadedWriter(twoNodes());
  auto snap = writer->snapshots().read();
  DecisionTally tally;
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"full", "free", "pod-mode", "ghost"});
  const std::string body = filterResponse(*snap, args, &tally);
  EXPECT_NE(body.find("\"NodeNames\":[\"free\"]"), std::string::npos) << body;
  EXPECT_NE(body.find("\"FailedNodes\":{\"full\":\"node(s) with 0 of 2"), std::string::npos) << body;
  EXPECT_NE(body.find("\"ghost\":\"node ghost is not in tally-extender's cache yet\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"FailedAndUnresolvableNodes\":{\"pod-mode\":"), std::string::npos) << body;
  EXPECT_EQ(tally.count(FilterResultKind::Pass, std::nullopt), 1u);
  EXPECT_EQ(tally.count(FilterResultKind::Failed, std::nullopt), 1u);
  EXPECT_EQ(tally.count(FilterResultKind::Failed, model::Code::NodeInsufficient), 1u);
  EXPECT_EQ(tally.count(FilterResultKind::Unresolvable, model::Code::NodeNotServed), 1u);
}

TEST(Filter, OnePassAnswerKeepsTheErrorWhenCachesAreNotSynced) {
  auto writer = halfSyncedWriter();
  auto snap = writer->snapshots().read();
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"free"});
  const std::string body = filterResponse(*snap, args);
  EXPECT_NE(body.find("\"NodeNames\":[]"), std::string::npos) << body;
  EXPECT_NE(body.find("GPUDevice"), std::string::npos) << body;
}

// The product's default: a GPU pod in a namespace no Organization holds is
// refused on every node, naming the namespace; the same pod once an
// Organization holds its namespace passes.
TEST(Filter, UnorganizedNamespaceIsRefusedUnderTheDefaultPolicy) {
  auto objects = twoNodes();
  auto writer = loadedWriter(objects, CacheWriter::Options{});
  DecisionTally tally;
  // The answer holds views into the arguments, which must outlive it.
  const auto args = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"full", "free"});
  auto r = filterNodes(*writer->snapshots().read(), args, &tally);
  EXPECT_TRUE(r.passed.empty());
  ASSERT_EQ(r.failed.size(), 2u);
  auto free = std::find_if(r.failed.begin(), r.failed.end(), [](const auto& f) { return f.first == "free"; });
  ASSERT_NE(free, r.failed.end());
  EXPECT_NE(free->second.find("namespace tenant-a is under no Organization"), std::string::npos) << free->second;
  EXPECT_EQ(tally.count(FilterResultKind::Failed, model::Code::NamespaceUnorganized), 1u)
      << "the full node answers with its own units first";

  model::Organization org;
  org.ns = org.name = "tenant-a";
  objects.push_back(org);
  auto organized = loadedWriter(objects, CacheWriter::Options{});
  const auto freeOnly = argsFor(gpuPod("tenant-a", "new", kH200, 1), {"free"});
  auto ok = filterNodes(*organized->snapshots().read(), freeOnly);
  ASSERT_EQ(ok.passed.size(), 1u) << (ok.failed.empty() ? ok.error : ok.failed[0].second);
  EXPECT_EQ(ok.passed[0], "free");
}

// Names JSON must escape (read through the careful parse, plainNames false)
// are escaped in the answers the service sends too: they read back to the
// lists filterNodes and prioritizeNodes give.
TEST(Filter, OnePassAnswersEscapeNamesThatNeedIt) {
  auto objects = twoNodes();
  objects.push_back(gpuNode("quoted\"node"));
  objects.push_back(gpuNode("back\\slash", model::NodeMode::VmPassthrough, kH200, 1));
  auto writer = loadedWriter(objects);
  auto snap = writer->snapshots().read();
  auto args = argsFor(gpuPod("tenant-a", "new", kH200, 2),
                      {"quoted\"node", "back\\slash", "free", "tab\tghost", "pod-mode", "full"});
  args.plainNames = false;
  DecisionTally listed, streamed;
  const wire::FilterResult lists = filterNodes(*snap, args, &listed);
  const std::string body = filterResponse(*snap, args, &streamed);
  EXPECT_EQ(body, wire::encode(lists));
  EXPECT_EQ(streamed.counts, listed.counts);

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(body).get(doc), simdjson::SUCCESS) << body;
  std::vector<std::string> passed;
  const simdjson::dom::array names = doc["NodeNames"].get_array().value();
  for (simdjson::dom::element name : names) passed.emplace_back(name.get_string().value());
  EXPECT_EQ(passed, (std::vector<std::string>{"quoted\"node", "free"}));
  std::vector<std::string> failed, unresolvable;
  const simdjson::dom::object failures = doc["FailedNodes"].get_object().value();
  const simdjson::dom::object forGood = doc["FailedAndUnresolvableNodes"].get_object().value();
  for (auto [name, message] : failures) failed.emplace_back(name);
  for (auto [name, message] : forGood) unresolvable.emplace_back(name);
  EXPECT_EQ(failed, (std::vector<std::string>{"back\\slash", "tab\tghost", "full"}));
  EXPECT_EQ(unresolvable, std::vector<std::string>{"pod-mode"});
  EXPECT_EQ(std::string_view(doc["FailedNodes"]["tab\tghost"].get_string().value()),
            "node tab\tghost is not in tally-extender's cache yet");

  const std::string scored = prioritizeResponse(*snap, args, model::ScoreStrategy::Spread);
  ASSERT_EQ(parser.parse(scored).get(doc), simdjson::SUCCESS) << scored;
  std::vector<std::pair<std::string, std::int64_t>> read, expected;
  const simdjson::dom::array entries = doc.get_array().value();
  for (simdjson::dom::element e : entries) {
    read.emplace_back(std::string_view(e["Host"].get_string().value()), e["Score"].get_int64().value());
  }
  for (const wire::HostPriority& p : prioritizeNodes(*snap, args, model::ScoreStrategy::Spread)) {
    if (wire::listedScore(p.score)) expected.emplace_back(p.host, p.score);
  }
  EXPECT_EQ(read, expected) << scored;
  EXPECT_FALSE(read.empty());
}
