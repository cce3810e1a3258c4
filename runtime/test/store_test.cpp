#include "tally/runtime/store.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <type_traits>

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

// A codec whose store keeps the key's resourceVersion only, as the state
// informers' do: each decoded object carries a payload whose lifetime the
// tests watch, to see that nothing but the handlers ever holds it.
struct Payload {
  std::string text;
};
struct Decoded {
  MetaObject meta;
  std::shared_ptr<const Payload> payload;
};
struct Version {
  std::string resourceVersion;
};
struct VersionOnlyCodec {
  using Object = Decoded;
  using Stored = Version;
  static Result<Object> fromJson(simdjson::ondemand::value) { return Error(ErrorCode::kDecode, "not decoded here"); }
  static std::string key(const Object& o) { return o.meta.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.meta.metadata.resourceVersion; }
  static Stored stored(const Object& o) { return {o.meta.metadata.resourceVersion}; }
  static std::string_view resourceVersion(const Stored& s) { return s.resourceVersion; }
};
static_assert(ProjectingCodec<VersionOnlyCodec>);
static_assert(!Store<VersionOnlyCodec>::kKeepsObjects && Store<MetaCodec>::kKeepsObjects);
static_assert(std::is_same_v<decltype(std::declval<Store<VersionOnlyCodec>::Snap>().get("")), const Version*>,
              "the snapshot holds what the codec stores");

Decoded decoded(std::string ns, std::string name, std::string rv, std::string text,
                std::vector<std::weak_ptr<const Payload>>* watch = nullptr) {
  Decoded d{obj(std::move(ns), std::move(name), std::move(rv)),
            std::make_shared<const Payload>(Payload{std::move(text)})};
  if (watch) watch->push_back(d.payload);
  return d;
}

bool allFreed(const std::vector<std::weak_ptr<const Payload>>& watched) {
  return std::all_of(watched.begin(), watched.end(), [](const auto& w) { return w.expired(); });
}

struct Seen {
  std::vector<std::string> events;
  Store<VersionOnlyCodec>::Handlers handlers() {
    return {[this](const Decoded& o) { events.push_back("add " + o.meta.metadata.name + " " + o.payload->text); },
            [this](const Version& old, const Decoded& now) {
              events.push_back("update " + now.meta.metadata.name + " " + old.resourceVersion + "->" +
                               now.meta.metadata.resourceVersion + " " + now.payload->text);
            },
            [this](const Version& old) { events.push_back("delete @" + old.resourceVersion); }};
  }
};

TEST(ProjectingStore, HandlersSeeTheDecodedObjectAndTheStoreKeepsOnlyItsProjection) {
  Store<VersionOnlyCodec> store;
  Seen seen;
  store.addHandlers(seen.handlers());
  std::vector<std::weak_ptr<const Payload>> payloads;
  store.apply(EventType::kAdded, decoded("a", "x", "1", "first", &payloads));
  store.apply(EventType::kModified, decoded("a", "x", "2", "second", &payloads));
  store.apply(EventType::kAdded, decoded("a", "y", "3", "other", &payloads));
  store.apply(EventType::kDeleted, decoded("a", "y", "4", "last", &payloads));
  EXPECT_FALSE(allFreed(payloads)) << "the decoded objects wait for their handlers";
  store.publish();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"add x first", "update x 1->2 second", "add y other", "delete @3"}));
  EXPECT_TRUE(allFreed(payloads)) << "nothing but the handlers held a decoded object";
  auto snap = store.snapshot();
  EXPECT_EQ(snap->size(), 1u);
  ASSERT_NE(snap->get("a/x"), nullptr);
  EXPECT_EQ(snap->get("a/x")->resourceVersion, "2");
  EXPECT_EQ(snap->resourceVersion(), "4");
}

TEST(ProjectingStore, ARelistComparesResourceVersionsAndHandsOnlyTheChangesOn) {
  Store<VersionOnlyCodec> store;
  store.apply(EventType::kAdded, decoded("a", "kept", "1", "old"));
  store.apply(EventType::kAdded, decoded("a", "changed", "1", "old"));
  store.apply(EventType::kAdded, decoded("a", "gone", "7", "old"));
  store.publish();
  Seen seen;
  store.addHandlers(seen.handlers());
  std::vector<std::weak_ptr<const Payload>> payloads;
  std::vector<Decoded> relisted;
  relisted.push_back(decoded("a", "kept", "1", "same", &payloads));
  relisted.push_back(decoded("a", "changed", "5", "new", &payloads));
  relisted.push_back(decoded("a", "new", "6", "fresh", &payloads));
  store.replace(std::move(relisted), "10");
  store.markSynced();
  store.publish();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"update changed 1->5 new", "add new fresh", "delete @7"}));
  EXPECT_TRUE(allFreed(payloads)) << "the relisted objects went to the handlers, or nowhere";
  auto snap = store.snapshot();
  EXPECT_EQ(snap->size(), 3u);
  EXPECT_EQ(snap->get("a/gone"), nullptr);
  ASSERT_NE(snap->get("a/changed"), nullptr);
  EXPECT_EQ(snap->get("a/changed")->resourceVersion, "5");
  EXPECT_EQ(snap->resourceVersion(), "10");
}

// A watch-list delivers its initial objects and then more events in one
// read: the handlers see the listed object first, then what followed.
TEST(ProjectingStore, EventsAppliedAfterARelistInTheSameBatchFollowItsAdds) {
  Store<VersionOnlyCodec> store;
  Seen seen;
  store.addHandlers(seen.handlers());
  std::vector<Decoded> listed;
  listed.push_back(decoded("a", "x", "1", "listed"));
  listed.push_back(decoded("a", "y", "2", "listed"));
  store.replace(std::move(listed), "2");
  store.apply(EventType::kModified, decoded("a", "x", "3", "watched"));
  store.apply(EventType::kDeleted, decoded("a", "y", "4", "watched"));
  store.publish();
  EXPECT_EQ(seen.events,
            (std::vector<std::string>{"add x listed", "add y listed", "update x 1->3 watched", "delete @2"}));
  EXPECT_EQ(store.snapshot()->size(), 1u);
}

TEST(ProjectingStore, AnObjectListedTwiceIsAddedOnceWithItsLaterValue) {
  Store<VersionOnlyCodec> store;
  Seen seen;
  store.addHandlers(seen.handlers());
  std::vector<Decoded> listed;
  listed.push_back(decoded("a", "x", "1", "first"));
  listed.push_back(decoded("a", "x", "2", "second"));
  store.replace(std::move(listed), "2");
  store.publish();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"add x second"}));
  ASSERT_NE(store.snapshot()->get("a/x"), nullptr);
  EXPECT_EQ(store.snapshot()->get("a/x")->resourceVersion, "2");
}

TEST(ProjectingStore, ARelistInPagesHandsEachPageOnAsItComesAndDeletesAfterThePublication) {
  Store<VersionOnlyCodec> store;
  store.apply(EventType::kAdded, decoded("a", "kept", "1", "old"));
  store.apply(EventType::kAdded, decoded("a", "changed", "1", "old"));
  store.apply(EventType::kAdded, decoded("a", "gone", "7", "old"));
  store.publish();
  Seen seen;
  store.addHandlers(seen.handlers());
  std::vector<std::weak_ptr<const Payload>> payloads;
  store.beginRelist();
  std::vector<Decoded> first;
  first.push_back(decoded("a", "kept", "1", "same", &payloads));
  first.push_back(decoded("a", "changed", "5", "new", &payloads));
  store.relistPage(std::move(first));
  EXPECT_EQ(seen.events, (std::vector<std::string>{"update changed 1->5 new"})) << "the page, before any publication";
  EXPECT_TRUE(allFreed(payloads)) << "a page's decoded objects are gone once it was handed on";
  std::vector<Decoded> second;
  second.push_back(decoded("a", "new", "6", "fresh", &payloads));
  store.relistPage(std::move(second));
  store.endRelist("10");
  EXPECT_EQ(seen.events.size(), 2u) << "deletions wait for the publication";
  store.markSynced();
  store.publish();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"update changed 1->5 new", "add new fresh", "delete @7"}));
  auto snap = store.snapshot();
  EXPECT_TRUE(snap->synced());
  EXPECT_EQ(snap->size(), 3u);
  EXPECT_EQ(snap->get("a/gone"), nullptr);
  EXPECT_EQ(snap->resourceVersion(), "10");
}

// A list that fails half-way is retried from the start: what its first pages
// delivered is not delivered again, and nothing is deleted on its account.
TEST(ProjectingStore, AnAbandonedRelistKeepsWhatItDeliveredAndTheRetryAddsNothingTwice) {
  Store<VersionOnlyCodec> store;
  store.apply(EventType::kAdded, decoded("a", "old", "1", "old"));
  store.publish();
  Seen seen;
  store.addHandlers(seen.handlers());
  store.beginRelist();
  std::vector<Decoded> page;
  page.push_back(decoded("a", "x", "2", "first try"));
  store.relistPage(std::move(page));
  store.abandonRelist();
  store.publish();
  EXPECT_EQ(store.snapshot()->size(), 2u) << "the old object stays: the list never finished";
  store.beginRelist();
  std::vector<Decoded> again;
  again.push_back(decoded("a", "x", "2", "retry"));
  store.relistPage(std::move(again));
  store.endRelist("3");
  store.publish();
  EXPECT_EQ(seen.events, (std::vector<std::string>{"add x first try", "delete @1"}));
  EXPECT_EQ(store.snapshot()->size(), 1u);
  EXPECT_EQ(store.snapshot()->resourceVersion(), "3");
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
