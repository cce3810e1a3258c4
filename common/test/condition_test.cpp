// metav1.Condition bookkeeping: the transition time moves with the status only.

#include <gtest/gtest.h>

#include "tally/common/condition.hpp"

using namespace tally;

namespace {

Condition bound(std::string status, std::string reason, std::string message = "m") {
  return Condition{"Bound", std::move(status), std::move(reason), std::move(message), "", 0};
}

TEST(Condition, ANewTypeIsAddedAtNow) {
  std::vector<Condition> list;
  EXPECT_TRUE(setCondition(list, bound("False", "NoSingleNode"), "2026-12-01T10:00:00Z"));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].lastTransitionTime, "2026-12-01T10:00:00Z");
  EXPECT_EQ(findCondition(list, "Bound"), &list[0]);
  EXPECT_EQ(findCondition(list, "Released"), nullptr);
}

TEST(Condition, SameStatusKeepsTheTransitionTimeAndReportsOnlyRealChanges) {
  std::vector<Condition> list;
  setCondition(list, bound("False", "NoSingleNode", "a"), "T1");
  EXPECT_FALSE(setCondition(list, bound("False", "NoSingleNode", "a"), "T2"));
  EXPECT_EQ(list[0].lastTransitionTime, "T1");
  EXPECT_TRUE(setCondition(list, bound("False", "PoolInsufficient", "b"), "T3"));
  EXPECT_EQ(list[0].lastTransitionTime, "T1");
  EXPECT_EQ(list[0].reason, "PoolInsufficient");
  EXPECT_TRUE(setCondition(list, bound("True", "Placed"), "T4"));
  EXPECT_EQ(list[0].lastTransitionTime, "T4");
  EXPECT_EQ(list.size(), 1u);
}

TEST(Condition, WritesTheApiShape) {
  std::vector<Condition> list{{"Bound", "True", "Placed", "on \"n1\"", "T", 3}};
  JsonWriter w;
  writeConditions(w, list);
  EXPECT_EQ(w.str(),
            R"([{"type":"Bound","status":"True","reason":"Placed","message":"on \"n1\"","lastTransitionTime":"T",)"
            R"("observedGeneration":3}])");
}

}  // namespace
