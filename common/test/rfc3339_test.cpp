#include <gtest/gtest.h>

#include <random>

#include "tally/common/rfc3339.hpp"

using namespace tally;

namespace {

std::int64_t secondsOf(std::string_view text) {
  auto t = parseRfc3339(text);
  EXPECT_TRUE(t.ok()) << text;
  return t ? t->seconds : -1;
}

}  // namespace

TEST(Rfc3339, ParsesOffsetsAndRejectsNonsense) {
  EXPECT_EQ(secondsOf("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(secondsOf("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(secondsOf("2024-02-29T00:00:00Z"), 1709164800);
  EXPECT_FALSE(parseRfc3339("2023-02-29T00:00:00Z"));
  EXPECT_FALSE(parseRfc3339("2026-13-01T00:00:00Z"));
  EXPECT_FALSE(parseRfc3339("yesterday"));
  EXPECT_FALSE(parseRfc3339("2026-01-01T00:00:00"));
  EXPECT_EQ(formatRfc3339(1709164800), "2024-02-29T00:00:00Z");
}

TEST(Rfc3339, NegativeAndPositiveOffsetsMoveTheInstantTheOtherWay) {
  EXPECT_EQ(secondsOf("2026-01-02T03:04:05-05:30"), secondsOf("2026-01-02T08:34:05Z"));
  EXPECT_EQ(secondsOf("2026-01-02T03:04:05+14:00"), secondsOf("2026-01-01T13:04:05Z"));
  EXPECT_EQ(secondsOf("2026-01-02T03:04:05+00:00"), secondsOf("2026-01-02T03:04:05z"));
  EXPECT_EQ(secondsOf("2026-01-02t03:04:05Z"), secondsOf("2026-01-02T03:04:05Z"));
}

TEST(Rfc3339, FractionsKeepNanosecondsAndCutTheRest) {
  EXPECT_EQ(parseRfc3339("2026-01-02T03:04:05.5Z")->nanos, 500'000'000);
  EXPECT_EQ(parseRfc3339("2026-01-02T03:04:05.000001Z")->nanos, 1'000);
  EXPECT_EQ(parseRfc3339("2026-01-02T03:04:05.123456789Z")->nanos, 123'456'789);
  EXPECT_EQ(parseRfc3339("2026-01-02T03:04:05.1234567891234Z")->nanos, 123'456'789);
  EXPECT_EQ(parseRfc3339("2026-01-02T03:04:05.25+01:00")->seconds, secondsOf("2026-01-02T02:04:05Z"));
}

TEST(Rfc3339, FormatsFixedFractionDigitsCuttingNotRounding) {
  const UnixTime t{1767323045, 678'999'999};
  EXPECT_EQ(formatRfc3339(t), "2026-01-02T03:04:05Z");
  EXPECT_EQ(formatRfc3339(t, 3), "2026-01-02T03:04:05.678Z");
  EXPECT_EQ(formatRfc3339(t, 6), "2026-01-02T03:04:05.678999Z");
  EXPECT_EQ(formatRfc3339(t, 9), "2026-01-02T03:04:05.678999999Z");
  EXPECT_EQ(formatRfc3339(UnixTime{0, 5}, 9), "1970-01-01T00:00:00.000000005Z");
}

TEST(Rfc3339, LeapSecondReadsAsTheNextSecond) {
  EXPECT_EQ(secondsOf("2016-12-31T23:59:60Z"), secondsOf("2017-01-01T00:00:00Z"));
}

TEST(Rfc3339, BadInputSaysWhy) {
  for (std::string_view bad :
       {"", "2026-01-02", "2026-01-02T03:04:05", "2026-01-02 03:04:05Z", "2026-1-02T03:04:05Z", "2026-01-02T24:00:00Z",
        "2026-01-02T03:60:00Z", "2026-01-02T03:04:61Z", "2026-04-31T00:00:00Z", "2026-00-10T00:00:00Z",
        "2026-01-00T00:00:00Z", "2026-01-02T03:04:05.Z", "2026-01-02T03:04:05+0100", "2026-01-02T03:04:05+24:00",
        "2026-01-02T03:04:05+01:60", "2026-01-02T03:04:05Zjunk", "2026-01-02T03:04:05+01:00 ", "+2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05UTC"}) {
    auto t = parseRfc3339(bad);
    ASSERT_FALSE(t) << bad;
    EXPECT_NE(t.error().describe().find("is not RFC 3339"), std::string::npos) << t.error().describe();
    EXPECT_NE(t.error().describe().find(std::string(bad)), std::string::npos) << t.error().describe();
  }
}

TEST(Rfc3339, TimePointsConvertToSecondsAndNanosFloored) {
  using namespace std::chrono;
  EXPECT_EQ(toUnixTime(system_clock::time_point(seconds(1767323045) + nanoseconds(678))), (UnixTime{1767323045, 678}));
  EXPECT_EQ(toUnixTime(system_clock::time_point(-nanoseconds(1))), (UnixTime{-1, 999'999'999}));
}

// Any instant from year 0001 to 9999, formatted with nanoseconds and read
// back, is the same instant.
TEST(Rfc3339, RoundTripsEveryDayOfFourHundredYearsAndRandomInstants) {
  const std::int64_t first = secondsOf("1900-01-01T00:00:00Z");
  for (std::int64_t day = 0; day < 146097; ++day) {
    const UnixTime t{first + day * 86400 + 43210, 0};
    auto back = parseRfc3339(formatRfc3339(t));
    ASSERT_TRUE(back) << formatRfc3339(t);
    ASSERT_EQ(*back, t) << formatRfc3339(t);
  }
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> seconds(secondsOf("0001-01-01T00:00:00Z"),
                                                      secondsOf("9999-12-31T23:59:59Z"));
  std::uniform_int_distribution<std::int32_t> nanos(0, 999'999'999);
  for (int i = 0; i < 20000; ++i) {
    const UnixTime t{seconds(rng), nanos(rng)};
    auto back = parseRfc3339(formatRfc3339(t, 9));
    ASSERT_TRUE(back) << formatRfc3339(t, 9);
    ASSERT_EQ(*back, t) << formatRfc3339(t, 9);
  }
}
