#include "tally/common/cow_map.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tally {
namespace {

TEST(CowMap, OldVersionsAreUnchangedByLaterEditsAcrossGrowth) {
  CowMap<int> v0;
  CowMap<int> live = v0;
  for (int i = 0; i < 10000; ++i) live[std::to_string(i)] = i;  // grows many times
  CowMap<int> v1 = live;
  live.erase("5");
  live["7"] = 700;
  CowMap<int> v2 = live;
  live.clear();

  EXPECT_EQ(v0.size(), 0u);
  EXPECT_EQ(v1.size(), 10000u);
  EXPECT_EQ(v2.size(), 9999u);
  EXPECT_EQ(live.size(), 0u);
  ASSERT_NE(v1.find("5"), nullptr);
  EXPECT_EQ(*v1.find("5"), 5);
  EXPECT_EQ(v2.find("5"), nullptr);
  EXPECT_EQ(*v1.find("7"), 7);
  EXPECT_EQ(*v2.find("7"), 700);
  std::size_t n = 0;
  v2.forEach([&](std::string_view, int) { ++n; });
  EXPECT_EQ(n, 9999u);
}

}  // namespace
}  // namespace tally
