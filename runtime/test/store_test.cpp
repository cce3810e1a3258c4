#include "tally/runtime/store.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tally/runtime/object_meta.hpp"

namespace tally::runtime {
namespace {

MetaObject obj(std::string ns, std::string name, std::string rv, std::string node = {}) {
  MetaObject o;
  o.metadata.ns = std::move(ns);
  o.metadata.name = std::move(name);
  o.metadata.resourceVersion = std::move(rv);
  if (!node.empty()) o.metadata.labels.emplace_back("node", std::move(node));
  return o;
}

TEST(Store, PublishMakesABatchVisibleAtOnce) {
  Store<MetaCodec> store;
  auto before = store.snapshot();
  store.apply(EventType::kAdded, obj("a", "x", "1"));
  store.apply(EventType::kAdded, obj("a", "y", "2"));
  EXPECT_EQ(store.snapshot()->size(), 0u) << "nothing is visible before publish";
  store.publish();
  auto after = store.snapshot();
  EXPECT_EQ(before->size(), 0u);
  EXPECT_EQ(after->size(), 2u);
  EXPECT_EQ(after->resourceVersion(), "2");
  ASSERT_NE(after->get("a/x"), nullptr);
  EXPECT_EQ(after->get("a/x")->metadata.resourceVersion, "1");
}

TEST(Store, HandlersSeeAddUpdateDeleteInOrderAfterPublish) {
  Store<MetaCodec> store;
  std::vector<std::string> seen;
  store.addHandlers({
      [&](const MetaObject& o) {
        EXPECT_EQ(store.snapshot()->generation(), 1u) << "handlers run after publish";
        seen.push_back("add " + o.metadata.name + "@" + o.metadata.resourceVersion);
      },
      [&](const MetaObject& old, const MetaObject& now) {
        seen.push_back("update " + old.metadata.resourceVersion + "->" + now.metadata.resourceVersion);
      },
      [&](const MetaObject& o) { seen.push_back("delete " + o.metadata.name); },
  });
  store.apply(EventType::kAdded, obj("a", "x", "1"));
  store.apply(EventType::kModified, obj("a", "x", "2"));
  store.apply(EventType::kDeleted, obj("a", "x", "3"));
  store.apply(EventType::kDeleted, obj("a", "never-seen", "4"));
  store.publish();
  EXPECT_EQ(seen, (std::vector<std::string>{"add x@1", "update 1->2", "delete x"}));
}

TEST(Store, ReplaceReportsDifferencesAgainstThePreviousContent) {
  Store<MetaCodec> store;
  store.apply(EventType::kAdded, obj("a", "kept", "1"));
  store.apply(EventType::kAdded, obj("a", "changed", "1"));
  store.apply(EventType::kAdded, obj("a", "gone", "1"));
  store.publish();
  std::vector<std::string> seen;
  store.addHandlers({[&](const MetaObject& o) { seen.push_back("add " + o.metadata.name); },
                     [&](const MetaObject& o, const MetaObject&) { seen.push_back("update " + o.metadata.name); },
                     [&](const MetaObject& o) { seen.push_back("delete " + o.metadata.name); }});
  std::vector<MetaObject> relisted{obj("a", "kept", "1"), obj("a", "changed", "5"), obj("a", "new", "6")};
  store.replace(std::move(relisted), "10");
  store.markSynced();
  store.publish();
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"add new", "delete gone", "update changed"}));
  auto snap = store.snapshot();
  EXPECT_TRUE(snap->synced());
  EXPECT_EQ(snap->size(), 3u);
  EXPECT_EQ(snap->resourceVersion(), "10");
}

TEST(Store, IndexFollowsMovesBetweenValues) {
  Store<MetaCodec> store;
  store.addIndex("node", [](const MetaObject& o) {
    const std::string* n = o.metadata.label("node");
    return n ? std::vector<std::string>{*n} : std::vector<std::string>{};
  });
  store.apply(EventType::kAdded, obj("a", "p1", "1", "n1"));
  store.apply(EventType::kAdded, obj("a", "p2", "2", "n1"));
  store.publish();
  EXPECT_EQ(store.snapshot()->byIndex("node", "n1").size(), 2u);
  store.apply(EventType::kModified, obj("a", "p1", "3", "n2"));
  store.apply(EventType::kDeleted, obj("a", "p2", "4", "n1"));
  store.publish();
  auto snap = store.snapshot();
  EXPECT_TRUE(snap->byIndex("node", "n1").empty());
  ASSERT_EQ(snap->byIndex("node", "n2").size(), 1u);
  EXPECT_EQ(snap->byIndex("node", "n2")[0]->metadata.name, "p1");
}

TEST(Store, HandlerExceptionIsContainedOnTheWriterThread) {
  Store<MetaCodec> store;
  int after = 0;
  store.addHandlers({[](const MetaObject&) { throw std::runtime_error("boom"); }, nullptr, nullptr});
  store.addHandlers({[&](const MetaObject&) { ++after; }, nullptr, nullptr});
  store.apply(EventType::kAdded, obj("a", "x", "1"));
  EXPECT_NO_THROW(store.publish());
  EXPECT_EQ(after, 1);
}

// Readers hold snapshots while the writer keeps publishing; each snapshot
// must stay internally consistent (TSan checks the publication).
TEST(StoreConcurrency, ReadersSeeConsistentSnapshotsWhileTheWriterPublishes) {
  Store<MetaCodec> store;
  constexpr int kObjects = 2000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      uint64_t lastGen = 0;
      while (!done.load()) {
        auto snap = store.snapshot();
        EXPECT_GE(snap->generation(), lastGen) << "generations never go back";
        lastGen = snap->generation();
        // Every published batch writes all objects at one resourceVersion.
        std::string rv;
        bool consistent = true;
        snap->forEach([&](std::string_view, const MetaObject& o) {
          if (rv.empty()) rv = o.metadata.resourceVersion;
          consistent = consistent && o.metadata.resourceVersion == rv;
        });
        EXPECT_TRUE(consistent);
        reads.fetch_add(1);
      }
    });
  }
  for (int round = 1; round <= 50; ++round) {
    for (int i = 0; i < kObjects; ++i)
      store.apply(EventType::kModified, obj("ns", std::to_string(i), std::to_string(round)));
    store.publish();
  }
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(store.snapshot()->size(), static_cast<size_t>(kObjects));
  EXPECT_GT(reads.load(), 0u);
}

}  // namespace
}  // namespace tally::runtime
