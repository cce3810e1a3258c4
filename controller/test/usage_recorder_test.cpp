// The usage recorder's decisions (usage_plan.hpp) without a server: where a
// record resumes, what each write of a flush holds, the split of a full day
// into parts, the stored ConfigMaps read back, and the /usage answer. What the
// API server would store after a write is the write's own ConfigMap body, read
// back through the real decoder.

#include "tally/controller/usage_plan.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::controller {
namespace {

using Action = UsageWrite::Action;
using model::Holder;
using model::HolderKind;
using model::Timestamp;
using state::assembleUsageDays;
using state::UsageDay;
using state::usageIn;

Timestamp at(std::string_view text) {
  auto t = parseRfc3339(text);
  EXPECT_TRUE(t) << text;
  return t ? t->seconds : 0;
}

Holder device(std::string name, std::int64_t units) {
  return {HolderKind::GpuDevice, "acme", name, "uid-" + name, "h200", "nvidia.com/h200", units};
}

std::int64_t unitSecondsOf(const std::vector<model::UsageBucket>& buckets, std::string_view name) {
  std::int64_t total = 0;
  for (const auto& b : buckets) {
    if (b.holder.name == name) total += b.unitSeconds;
  }
  return total;
}

// The parts as the API server would hold them after each successful write.
struct Stored {
  std::vector<codec::UsageCheckpoint> parts;
  int revision = 0;

  void apply(const UsageWrite& w) {
    auto cp = codec::decodeUsageConfigMap(usageConfigMapBody("tally-system", w));
    ASSERT_TRUE(cp) << cp.error().describe();
    cp->resourceVersion = std::to_string(++revision);
    for (auto& p : parts) {
      if (p.name == cp->name) {
        ASSERT_NE(w.action, Action::kCreate) << w.name << " exists";
        ASSERT_EQ(p.resourceVersion, w.resourceVersion) << w.name << ": the write is pinned to what it read";
        p = std::move(cp).value();
        return;
      }
    }
    ASSERT_EQ(w.action, Action::kCreate) << w.name << " does not exist";
    parts.push_back(std::move(cp).value());
  }
  std::vector<UsageDay> days(Timestamp now) const {
    return assembleUsageDays(parts, now - 7 * model::kSecondsPerDay, now);
  }
  std::vector<model::UsageBucket> buckets(Timestamp now) const {
    return usageIn(days(now), now - 7 * model::kSecondsPerDay, now + 1);
  }
};

// One flush as the recorder makes it: plan, write, until the record reaches now.
std::vector<UsageWrite> flush(Stored& stored, UsageTerm& term, Timestamp now, const std::vector<Holder>& current,
                              std::size_t maxBytes = kMaxUsageBytes) {
  std::vector<UsageWrite> writes;
  for (int i = 0; i < 1000; ++i) {
    UsageWrite w = planUsageWrite(stored.days(now), now, term, current, maxBytes);
    if (w.action == Action::kNone || w.action == Action::kTooLarge) {
      writes.push_back(std::move(w));
      return writes;
    }
    stored.apply(w);
    term = termAfter(w, term, now, current);
    const bool done = flushDone(w, now);
    writes.push_back(std::move(w));
    if (done) return writes;
  }
  ADD_FAILURE() << "a flush that never reaches now";
  return writes;
}

const Timestamp kNoon = at("2027-01-15T12:00:00Z");

TEST(UsagePlan, TheFirstFlushWithNoRecordStartsNowInTodaysFirstPart) {
  UsageWrite w = planUsageWrite({}, kNoon + 30, {}, {device("a", 2)});
  EXPECT_EQ(w.action, Action::kCreate);
  EXPECT_EQ(w.name, "tally-usage-20270115");
  EXPECT_EQ(w.from, kNoon + 30);
  EXPECT_EQ(w.through, kNoon + 30);
  EXPECT_TRUE(w.added.empty());  // nothing before the record began is guessed
  const std::string body = usageConfigMapBody("tally-system", w);
  EXPECT_NE(body.find(R"("tally.dev/usage-day":"20270115")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("tally.dev/usage-part":"0")"), std::string::npos) << body;
  EXPECT_EQ(body.find("resourceVersion"), std::string::npos) << "a create is pinned to nothing";
}

TEST(UsagePlan, EachTickAddsWhatTheHoldersHeldSinceThroughAndMovesThroughInTheSameWrite) {
  Stored stored;
  UsageTerm term;
  flush(stored, term, kNoon, {device("a", 2)});
  auto writes = flush(stored, term, kNoon + 60, {device("a", 2)});
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].action, Action::kUpdate);
  EXPECT_EQ(writes[0].resourceVersion, "1");
  EXPECT_EQ(writes[0].through, kNoon + 60);
  ASSERT_EQ(writes[0].added.size(), 1u);
  EXPECT_EQ(writes[0].added[0].unitSeconds, 2 * 60);
  EXPECT_NE(usageConfigMapBody("tally-system", writes[0]).find(R"("resourceVersion":"1")"), std::string::npos);
  EXPECT_EQ(unitSecondsOf(stored.buckets(kNoon + 60), "a"), 2 * 60);
}

TEST(UsagePlan, AResumedRecordIsNotCountedTwice) {
  Stored stored;
  UsageTerm term;
  flush(stored, term, kNoon, {device("a", 1)});
  flush(stored, term, kNoon + 100, {device("a", 1)});
  // A restart at the same moment (a new term, nothing remembered) reads the same record.
  UsageTerm restarted;
  UsageWrite again = planUsageWrite(stored.days(kNoon + 100), kNoon + 100, restarted, {device("a", 1)});
  EXPECT_EQ(again.from, kNoon + 100);
  EXPECT_TRUE(again.added.empty());
  flush(stored, restarted, kNoon + 100, {device("a", 1)});
  flush(stored, restarted, kNoon + 160, {device("a", 1)});
  EXPECT_EQ(unitSecondsOf(stored.buckets(kNoon + 160), "a"), 160);
}

TEST(UsagePlan, ANewLeaderAccruesTheGapSinceTheOldLeadersLastFlushOnceWithTheHoldersItSees) {
  Stored stored;
  UsageTerm old;
  flush(stored, old, kNoon, {device("a", 2)});
  flush(stored, old, kNoon + 50, {device("a", 2)});
  // The old leader dies at kNoon + 70 without a flush; the new one's first flush is at kNoon + 95.
  UsageTerm fresh;
  auto writes = flush(stored, fresh, kNoon + 95, {device("a", 2)});
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].from, kNoon + 50);
  EXPECT_EQ(unitSecondsOf(stored.buckets(kNoon + 95), "a"), 2 * 95);  // nothing lost, nothing doubled
}

TEST(UsagePlan, TheSpanSinceTheTermsFlushIsBilledToTheHoldersOfThatFlush) {
  Stored stored;
  UsageTerm term;
  flush(stored, term, kNoon, {device("a", 1)});
  // b replaced a at some moment before kNoon + 40: the span is a's (the change is seen within a check).
  auto writes = flush(stored, term, kNoon + 40, {device("b", 1)});
  EXPECT_EQ(unitSecondsOf(writes[0].added, "a"), 40);
  EXPECT_EQ(unitSecondsOf(writes[0].added, "b"), 0);
  flush(stored, term, kNoon + 100, {device("b", 1)});
  EXPECT_EQ(unitSecondsOf(stored.buckets(kNoon + 100), "b"), 60);
  // Another writer moved `through` since: the span is not this term's to remember.
  UsageTerm behind{kNoon + 40, {device("a", 1)}};
  UsageWrite w = planUsageWrite(stored.days(kNoon + 130), kNoon + 130, behind, {device("b", 1)});
  EXPECT_EQ(w.from, kNoon + 100);
  EXPECT_EQ(unitSecondsOf(w.added, "b"), 30);
  EXPECT_EQ(unitSecondsOf(w.added, "a"), 0);
}

TEST(UsagePlan, TwoWritersOnOneReadArePinnedToTheSameVersionSoOnlyOneWriteCanLand) {
  Stored stored;
  UsageTerm a, b;
  flush(stored, a, kNoon, {device("x", 1)});
  const auto read = stored.days(kNoon + 10);
  UsageWrite first = planUsageWrite(read, kNoon + 10, a, {device("x", 1)});
  UsageWrite second = planUsageWrite(read, kNoon + 12, b, {device("x", 1)});
  EXPECT_EQ(first.resourceVersion, second.resourceVersion);  // the server refuses the later one (409)
  stored.apply(first);
  // The refused writer re-reads and goes on from the first one's `through`.
  UsageWrite retried = planUsageWrite(stored.days(kNoon + 12), kNoon + 12, b, {device("x", 1)});
  EXPECT_EQ(retried.from, kNoon + 10);
  EXPECT_EQ(unitSecondsOf(retried.added, "x"), 2);
}

TEST(UsagePlan, ARecordAheadOfTheClockAddsNothingUntilTheClockPassesIt) {
  Stored stored;
  UsageTerm term;
  flush(stored, term, kNoon + 600, {device("a", 1)});
  EXPECT_EQ(planUsageWrite(stored.days(kNoon), kNoon, {}, {device("a", 1)}).action, Action::kNone);
}

TEST(UsagePlan, APeriodAcrossMidnightClosesTheOlderDayFirstThenOpensTheNext) {
  const Timestamp midnight = at("2027-01-16T00:00:00Z");
  Stored stored;
  UsageTerm term;
  flush(stored, term, midnight - 60, {device("a", 1)});
  auto writes = flush(stored, term, midnight + 120, {device("a", 1)});
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[0].name, "tally-usage-20270115");
  EXPECT_EQ(writes[0].through, midnight);
  EXPECT_EQ(writes[1].action, Action::kCreate);
  EXPECT_EQ(writes[1].name, "tally-usage-20270116");
  EXPECT_EQ(writes[1].from, midnight);
  auto days = stored.days(midnight + 120);
  ASSERT_EQ(days.size(), 2u);
  EXPECT_EQ(unitSecondsOf(days[0].buckets(), "a"), 60);
  EXPECT_EQ(unitSecondsOf(days[1].buckets(), "a"), 120);
}

// Holders enough that one hour of them is `bytes` of usage.jsonl, roughly.
std::vector<Holder> holdersWorth(std::size_t bytes) {
  std::vector<Holder> out;
  const std::size_t perLine = codec::usageLine({0, device("d-00000", 1), 3600}).size() + 1;
  for (std::size_t i = 0; i < bytes / perLine; ++i) out.push_back(device(fmt::format("d-{:05}", i), 1));
  return out;
}

TEST(UsagePlan, ADayPastTheSizeOfOneConfigMapIsSealedAndContinuesInItsNextPartReadBackAsOne) {
  const Timestamp day = at("2027-01-15T00:00:00Z");
  // 23 hours of ~40 KiB: ~920 KiB of records in one day, more than one part holds.
  const auto holders = holdersWorth(40 * 1024);
  Stored stored;
  UsageTerm term;
  std::vector<UsageWrite> all;
  for (int hour = 0; hour <= 23; ++hour) {
    for (auto& w : flush(stored, term, day + hour * 3600, holders)) all.push_back(std::move(w));
  }
  std::vector<std::string> seals;
  for (const auto& w : all) {
    if (w.action == Action::kSeal) seals.push_back(w.name);
  }
  ASSERT_EQ(seals, std::vector<std::string>{"tally-usage-20270115"});
  ASSERT_EQ(stored.parts.size(), 2u);
  EXPECT_EQ(stored.parts[1].name, "tally-usage-20270115-1");
  EXPECT_TRUE(stored.parts[0].sealed);
  EXPECT_FALSE(stored.parts[1].sealed);
  for (const auto& p : stored.parts) EXPECT_LE(p.bytes, kMaxUsageBytes) << p.name;
  auto days = stored.days(day + 23 * 3600);
  ASSERT_EQ(days.size(), 1u);
  EXPECT_EQ(days[0].through(), day + 23 * 3600);
  // Read back as one: every holder held 23 hours, once.
  const auto buckets = days[0].buckets();
  EXPECT_EQ(buckets.size(), holders.size() * 23);
  for (const auto& h : {holders.front(), holders.back()}) EXPECT_EQ(unitSecondsOf(buckets, h.name), 23 * 3600);
  // A writer that read the full part before the seal is refused: the seal moved its version.
  EXPECT_NE(stored.parts[0].resourceVersion, "1");
  // The next tick writes the highest part only.
  auto next = flush(stored, term, day + 23 * 3600 + 60, holders);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].action, Action::kUpdate);
  EXPECT_EQ(next[0].name, "tally-usage-20270115-1");
}

TEST(UsagePlan, ALongGapWithManyHoldersIsWrittenAnHourAtATimeIntoAsManyPartsAsItNeeds) {
  const Timestamp day = at("2027-01-15T00:00:00Z");
  const std::size_t limit = 16 * 1024;
  const auto holders = holdersWorth(6 * 1024);  // ~6 KiB an hour, 16 KiB a part
  Stored stored;
  UsageTerm term;
  flush(stored, term, day, holders, limit);
  UsageTerm fresh;  // a new leader, ten hours later
  auto writes = flush(stored, fresh, day + 10 * 3600, holders, limit);
  ASSERT_FALSE(writes.empty());
  EXPECT_EQ(writes[0].until - writes[0].from, 3600) << "ten hours do not fit in a part: the first hour alone";
  for (const auto& w : writes) {
    ASSERT_NE(w.action, Action::kTooLarge) << w.error;
    EXPECT_LE(w.usage.size(), limit) << w.name;
  }
  for (const auto& p : stored.parts) EXPECT_LE(p.bytes, limit) << p.name;
  EXPECT_GE(stored.parts.size(), 4u);
  const auto buckets = stored.buckets(day + 10 * 3600);
  EXPECT_EQ(unitSecondsOf(buckets, holders.front().name), 10 * 3600);
  EXPECT_EQ(unitSecondsOf(buckets, holders.back().name), 10 * 3600);
}

TEST(UsagePlan, OneHourOfHoldersPastAPartsSizeIsRefusedNamingThePartItsSizeAndTheLimit) {
  const Timestamp day = at("2027-01-15T00:00:00Z");
  const auto holders = holdersWorth(8 * 1024);
  Stored stored;
  UsageTerm term;
  flush(stored, term, day, holders, 4096);
  UsageWrite w = planUsageWrite(stored.days(day + 3600), day + 3600, term, holders, 4096);
  EXPECT_EQ(w.action, Action::kTooLarge);
  EXPECT_NE(w.error.find("tally-usage-20270115"), std::string::npos) << w.error;
  EXPECT_NE(w.error.find("4096"), std::string::npos) << w.error;
  EXPECT_EQ(stored.parts.size(), 1u);
  EXPECT_EQ(stored.days(day + 3600)[0].through(), day) << "nothing moved";
}

std::string configMap(std::string_view name, std::string_view through, const std::vector<model::UsageBucket>& b,
                      std::string_view rv = "7") {
  return fmt::format(R"({{"metadata":{{"name":"{}","namespace":"tally-system","resourceVersion":"{}"}},)"
                     R"("data":{{"through":"{}","usage.jsonl":{}}}}})",
                     name, rv, through, jsonString(codec::usageLines(b)));
}

model::UsageBucket bucket(Timestamp hour, std::string name, std::int64_t seconds) {
  return {hour, device(std::move(name), 1), seconds};
}

TEST(UsageConfigMaps, AListOfPartsIsReadIntoDaysWithTheirParts) {
  const Timestamp day = at("2027-01-15T00:00:00Z");
  const std::string list = R"({"kind":"ConfigMapList","metadata":{"continue":"next"},"items":[)" +
                           configMap("tally-usage-20270115-1", "2027-01-15T09:00:00Z", {bucket(day + 3600, "a", 5)}) +
                           "," +
                           configMap("tally-usage-20270115", "2027-01-15T08:00:00Z", {bucket(day + 3600, "a", 7)}) +
                           "," + configMap("tally-usage-20270114", "2027-01-15T00:00:00Z", {}) + "]}";
  auto page = codec::decodeUsageConfigMapList(list);
  ASSERT_TRUE(page) << page.error().describe();
  EXPECT_EQ(page->continueToken, "next");
  ASSERT_EQ(page->items.size(), 3u);
  EXPECT_EQ(page->items[0].part, 1);
  EXPECT_EQ(page->items[0].day, day);
  auto days = assembleUsageDays(page->items, day, day);  // the 14th is outside: dropped client-side
  ASSERT_EQ(days.size(), 1u);
  ASSERT_EQ(days[0].parts.size(), 2u);
  EXPECT_EQ(days[0].parts[0].part, 0);
  EXPECT_EQ(days[0].through(), at("2027-01-15T09:00:00Z"));
  ASSERT_EQ(days[0].buckets().size(), 1u);
  EXPECT_EQ(days[0].buckets()[0].unitSeconds, 12);
}

TEST(UsageConfigMaps, BadStoredDataIsAnErrorNamingTheConfigMapAndTheField) {
  const Timestamp day = at("2027-01-15T00:00:00Z");
  const std::string good = configMap("tally-usage-20270115", "2027-01-15T08:00:00Z", {bucket(day, "a", 5)});
  auto listOf = [&](const std::string& bad) { return R"({"items":[)" + good + "," + bad + "]}"; };
  struct Case {
    std::string item;
    std::string says;
  };
  for (
      const Case& c : std::vector<Case>{
          {configMap("tally-usage-20270116", "soon", {}), "data.through"},
          {configMap("tally-usage-20270116", "2027-01-18T00:00:00Z", {}), "outside the ConfigMap's day"},
          {configMap("tally-usage-20270116", "2027-01-16T01:00:00Z", {bucket(day, "a", 5)}), "not of its day"},
          {configMap("tally-usage-20270230", "2027-01-16T01:00:00Z", {}), "metadata.name"},
          {configMap("tally-usage-20270116-0", "2027-01-16T01:00:00Z", {}), "metadata.name"},
          {R"({"metadata":{"name":"tally-usage-20270116","namespace":"tally-system"},"data":{"usage.jsonl":"{\"type\":\"usage\"}"}})",
           "usage line 1"},
          {R"({"metadata":{"name":"tally-usage-20270116","namespace":"tally-system"},"data":{"sealed":"maybe"}})",
           "data.sealed"},
      }) {
    auto page = codec::decodeUsageConfigMapList(listOf(c.item));
    ASSERT_FALSE(page) << c.item;
    const std::string said = page.error().describe();
    EXPECT_NE(said.find("items[1]"), std::string::npos) << said;
    EXPECT_NE(said.find("ConfigMap tally-system/tally-usage-20270"), std::string::npos) << said;
    EXPECT_NE(said.find(c.says), std::string::npos) << said;
  }
}

TEST(UsageConfigMaps, PartNamesAndTheDaySelector) {
  auto p = codec::parseUsageConfigMapName("tally-usage-20270115-12");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->day, at("2027-01-15T00:00:00Z"));
  EXPECT_EQ(p->part, 12);
  EXPECT_EQ(codec::usageConfigMapName(p->day, 12), "tally-usage-20270115-12");
  EXPECT_EQ(codec::usageConfigMapName(p->day), "tally-usage-20270115");
  for (const char* bad : {"tally-usage-2027011", "tally-usage-20271315", "tally-usage-20270115-",
                          "tally-usage-20270115x", "billing-plans", "tally-usage-20270115-01"}) {
    EXPECT_FALSE(codec::parseUsageConfigMapName(bad)) << bad;
  }
  // YYYYMMDD orders as an integer: one range over a month's end.
  EXPECT_EQ(codec::usageDaysSelector(at("2027-01-31T10:00:00Z"), at("2027-02-01T23:00:00Z")),
            "tally.dev/usage-day>20270130,tally.dev/usage-day<20270202");
}

TEST(UsageAnswer, APeriodNeedsSinceAndAnUntilAfterItDefaultingToNow) {
  const Timestamp now = kNoon;
  auto p = parseUsagePeriod("2027-01-15T10:00:00Z", std::nullopt, now);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->since, kNoon - 7200);
  EXPECT_EQ(p->until, now);
  EXPECT_FALSE(parseUsagePeriod(std::nullopt, std::nullopt, now));
  EXPECT_FALSE(parseUsagePeriod("yesterday", std::nullopt, now));
  EXPECT_FALSE(parseUsagePeriod("1969-12-31T00:00:00Z", std::nullopt, now));
  EXPECT_FALSE(parseUsagePeriod("2027-01-15T10:00:00Z", "2027-01-15T10:00:00Z", now));
  EXPECT_FALSE(parseUsagePeriod("2027-01-15T10:00:00Z", "later", now));
}

TEST(UsageAnswer, APeriodInsideDaysKeepsTheHoursFromSinceToUntilOfEveryPart) {
  const Timestamp d14 = at("2027-01-14T00:00:00Z"), d15 = at("2027-01-15T00:00:00Z");
  std::vector<codec::UsageCheckpoint> parts(3);
  parts[0].name = "tally-usage-20270114";
  parts[0].day = d14;
  parts[0].buckets = {bucket(d14 + 22 * 3600, "a", 10), bucket(d14 + 23 * 3600, "a", 20)};
  parts[1].name = "tally-usage-20270115";
  parts[1].day = d15;
  parts[1].buckets = {bucket(d15, "a", 30), bucket(d15 + 2 * 3600, "a", 40)};
  parts[2].name = "tally-usage-20270115-1";
  parts[2].day = d15;
  parts[2].part = 1;
  parts[2].buckets = {bucket(d15, "a", 1), bucket(d15 + 3600, "a", 50)};
  auto days = assembleUsageDays(parts, d14, d15);
  // Since inside the 14th's last hour: its hour began before since and is left out (hours are whole).
  auto b = usageIn(days, d14 + 23 * 3600, d15 + 2 * 3600);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].unitSeconds, 20);
  EXPECT_EQ(b[1].unitSeconds, 31);  // two parts, one hour: summed
  EXPECT_EQ(b[2].unitSeconds, 50);
  EXPECT_EQ(unitSecondsOf(usageIn(days, d14 + 23 * 3600 + 1, d15 + 3600 + 1), "a"), 31 + 50);
  EXPECT_TRUE(usageIn(days, d15 + 3 * 3600, d15 + 4 * 3600).empty());
}

TEST(UsageAnswer, AnOpenBillingWindowAskedUntilAFutureMomentEndsAtTheAnswer) {
  model::Ledger ledger;
  model::ReservationRecord r;
  r.id = "gpu-res-1";
  r.organization = "acme";
  r.devices = 4;
  r.state = model::ReservationState::Active;
  r.activatedAt = kNoon - 3600;
  ledger.records.push_back(r);
  const UsagePeriod period{kNoon - 7200, kNoon + 86400};
  const std::string answer = usageAnswer({}, period, ledger, kNoon);
  EXPECT_NE(answer.find(R"("until":"2027-01-15T12:00:00Z")"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"("open":true)"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"("deviceSeconds":14400)"), std::string::npos) << answer;
}

}  // namespace
}  // namespace tally::controller
