#include <gtest/gtest.h>

#include <random>

#include "tally/common/quantity.hpp"

using namespace tally;

namespace {

std::int64_t whole(std::string_view text) {
  auto parsed = parseWholeQuantity(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << (parsed ? "" : describeQuantityError(text, parsed.error()));
  return parsed ? *parsed : -1;
}

std::string refusal(std::string_view text) {
  auto parsed = parseWholeQuantity(text);
  EXPECT_FALSE(parsed.ok()) << text;
  return parsed ? "" : describeQuantityError(text, parsed.error());
}

std::int64_t milli(std::string_view text) {
  auto parsed = parseQuantityMilli(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed ? *parsed : -1;
}

Int128 nanos(std::string_view text) {
  auto parsed = parseQuantity(text);
  EXPECT_TRUE(parsed.ok()) << text;
  return parsed ? parsed->nanos() : -1;
}

Int128 tenTo(int n) {
  Int128 v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

}  // namespace

// Whole numbers (the codec's GPU counts).

TEST(Quantity, PlainIntegers) {
  EXPECT_EQ(whole("0"), 0);
  EXPECT_EQ(whole("1"), 1);
  EXPECT_EQ(whole("8"), 8);
  EXPECT_EQ(whole("+3"), 3);
  EXPECT_EQ(whole("007"), 7);
}

TEST(Quantity, DecimalSuffixes) {
  EXPECT_EQ(whole("2k"), 2000);
  EXPECT_EQ(whole("3M"), 3000000);
  EXPECT_EQ(whole("1G"), 1000000000);
  EXPECT_EQ(whole("2E"), 2000000000000000000);
}

TEST(Quantity, BinarySuffixes) {
  EXPECT_EQ(whole("1Ki"), 1024);
  EXPECT_EQ(whole("1Gi"), 1073741824);
  EXPECT_EQ(whole("16Gi"), 17179869184);
  EXPECT_EQ(whole("0.5Ki"), 512);
}

TEST(Quantity, ExponentForms) {
  EXPECT_EQ(whole("1e3"), 1000);
  EXPECT_EQ(whole("12E2"), 1200);
  EXPECT_EQ(whole("1000e-3"), 1);
  EXPECT_NE(refusal("1500e-3").find("not a whole number"), std::string::npos);
}

TEST(Quantity, MilliValuesThatAreWholeNumbersAreAccepted) {
  EXPECT_EQ(whole("2000m"), 2);
  EXPECT_EQ(whole("1.0"), 1);
  EXPECT_EQ(whole("2.50k"), 2500);
}

TEST(Quantity, FractionalGpuAmountsAreRefusedNotRounded) {
  EXPECT_NE(refusal("0.5").find("not a whole number"), std::string::npos);
  EXPECT_NE(refusal("500m").find("not a whole number"), std::string::npos);
  EXPECT_NE(refusal("1500m").find("\"1500m\""), std::string::npos);
  EXPECT_NE(refusal("1n").find("not a whole number"), std::string::npos);
}

TEST(Quantity, MalformedTextIsRefused) {
  for (std::string_view text : {"", "abc", "1x", "Gi", "1 Gi", "1.2.3", "--1", "1Kii", "1e", "1e+", "0x10", "1e1000"}) {
    EXPECT_NE(refusal(text).find("malformed"), std::string::npos) << text;
  }
}

TEST(Quantity, HugeValuesAreOutOfRangeNotWrapped) {
  EXPECT_NE(refusal("9223372036854775808").find("out of range"), std::string::npos);
  EXPECT_NE(refusal("99999999999999999999999999999999999999999").find("out of range"), std::string::npos);
  EXPECT_NE(refusal("9Ei").find("out of range"), std::string::npos);
  EXPECT_NE(refusal("1e999").find("out of range"), std::string::npos);
  EXPECT_EQ(whole("9223372036854775807"), 9223372036854775807);
}

TEST(Quantity, NegativeValuesParse) { EXPECT_EQ(whole("-2"), -2); }

TEST(Quantity, RefusalsQuoteTheTextAndSayWhy) {
  EXPECT_EQ(refusal("500m"), "quantity \"500m\" is not a whole number");
  EXPECT_EQ(refusal("1x"), "quantity \"1x\" is malformed");
  EXPECT_EQ(refusal("1e999"), "quantity \"1e999\" is out of range");
}

// Milli-units (the runtime's request amounts).

TEST(Quantity, ParsesKubernetesQuantitiesToMilliUnits) {
  EXPECT_EQ(milli("2"), 2000);
  EXPECT_EQ(milli("500m"), 500);
  EXPECT_EQ(milli("0.5"), 500);
  EXPECT_EQ(milli("1Ki"), 1024000);
  EXPECT_EQ(milli("16Gi"), 16LL * (1LL << 30) * 1000);
  EXPECT_EQ(milli("1k"), 1000000);
  EXPECT_EQ(milli("1e3"), 1000000);
  EXPECT_EQ(milli("1.5"), 1500);
  EXPECT_EQ(milli("1u"), 1) << "rounded up to a milli-unit";
  EXPECT_EQ(milli("-2"), -2000);
  for (const char* bad : {"", "Gi", "1Xi", "1.2.3", "abc", "1e", "9Ei", "1e400"}) {
    EXPECT_FALSE(parseQuantityMilli(bad).ok()) << bad;
  }
}

TEST(Quantity, MilliRoundsUpAwayFromZeroAsKubernetesDoes) {
  EXPECT_EQ(milli("0.30000000000000004"), 301);
  EXPECT_EQ(milli("1.0001"), 1001);
  EXPECT_EQ(milli("-1.0001"), -1001);
  EXPECT_EQ(milli("1n"), 1);
  // Far below a milli-unit still rounds up to one (a long double read it as 0).
  EXPECT_EQ(milli("1e-50"), 1);
  EXPECT_EQ(milli("0.9Gi"), 966367641600);
}

TEST(Quantity, MilliRangeIsInt64) {
  EXPECT_EQ(milli("9223372036854775807m"), INT64_MAX);
  EXPECT_EQ(parseQuantityMilli("9223372036854775808m").error(), QuantityError::OutOfRange);
  EXPECT_EQ(parseQuantityMilli("8Ei").error(), QuantityError::OutOfRange);
  EXPECT_EQ(whole("7Ei"), 7 * (std::int64_t{1} << 60));
}

// The grammar and the exact value.

TEST(Quantity, NumbersMayStartOrEndWithThePoint) {
  EXPECT_EQ(milli(".5"), 500);
  EXPECT_EQ(milli("1."), 1000);
  EXPECT_EQ(milli("-.5k"), -500000);
  EXPECT_FALSE(parseQuantity(".").ok());
  EXPECT_FALSE(parseQuantity("+").ok());
  EXPECT_FALSE(parseQuantity("1..").ok());
}

TEST(Quantity, SuffixesAreExactlyKubernetesList) {
  EXPECT_EQ(nanos("1n"), 1);
  EXPECT_EQ(nanos("1u"), 1000);
  EXPECT_EQ(nanos("1m"), 1000000);
  EXPECT_EQ(nanos("1P"), tenTo(24));
  EXPECT_EQ(nanos("1E"), tenTo(27)) << "E alone is exa, not an exponent";
  EXPECT_EQ(nanos("1Ei"), (static_cast<Int128>(1) << 60) * tenTo(9));
  EXPECT_EQ(nanos("3Ti"), 3 * (static_cast<Int128>(1) << 40) * tenTo(9));
  for (std::string_view bad : {"1K", "1ki", "1mi", "1Mb", "1KiB", "1i", "1 ", " 1", "1m ", "1Ki2", "1e3k", "1ee3"}) {
    EXPECT_EQ(parseQuantity(bad).error(), QuantityError::Malformed) << bad;
  }
}

TEST(Quantity, ExponentsTakeASignAndAtMostThreeDigits) {
  EXPECT_EQ(nanos("1e0"), tenTo(9));
  EXPECT_EQ(nanos("1E+3"), tenTo(12));
  EXPECT_EQ(nanos("5e-9"), 5);
  EXPECT_EQ(nanos("2.5e-1"), 250000000);
  EXPECT_EQ(nanos("1e029"), tenTo(38));
  EXPECT_EQ(parseQuantity("1e1000").error(), QuantityError::Malformed);
  EXPECT_EQ(parseQuantity("1e-").error(), QuantityError::Malformed);
  EXPECT_EQ(parseQuantity("1e3.0").error(), QuantityError::Malformed);
  EXPECT_EQ(nanos("0e999"), 0) << "zero stays zero at any scale";
}

TEST(Quantity, DigitsBelowANanoUnitRoundUpAwayFromZero) {
  EXPECT_EQ(nanos("0.0000000001"), 1);
  EXPECT_EQ(nanos("-0.0000000001"), -1);
  EXPECT_EQ(nanos("1.0000000001"), 1000000001);
  EXPECT_EQ(nanos("1.0000000000"), 1000000000) << "zeros are not a fraction";
  EXPECT_EQ(nanos("1e-999"), 1);
  // Kubernetes reads 0.9999999999 as 1 (rounded to nano), so it is whole.
  EXPECT_EQ(whole("0.9999999999"), 1);
}

TEST(Quantity, TheRangeIsOneHundredTwentySevenBitsOfNanoUnits) {
  const Int128 max = ~(static_cast<Int128>(1) << 127);
  // 2^127 - 1 nano-units, written as units with nine fraction digits.
  EXPECT_EQ(nanos("170141183460469231731687303715.884105727"), max);
  EXPECT_EQ(nanos("-170141183460469231731687303715.884105727"), -max);
  EXPECT_EQ(parseQuantity("170141183460469231731687303715.884105728").error(), QuantityError::OutOfRange);
  EXPECT_EQ(parseQuantity("170141183460469231731687303716").error(), QuantityError::OutOfRange);
  // A digit past the 128 bits, below a nano-unit, rounds up to the last one that fits or past it.
  EXPECT_EQ(nanos("170141183460469231731687303715.8841057261"), max);
  EXPECT_EQ(parseQuantity("170141183460469231731687303715.8841057271").error(), QuantityError::OutOfRange);
  EXPECT_EQ(parseQuantity("1e30").error(), QuantityError::OutOfRange);
  EXPECT_EQ(nanos("1e29"), tenTo(38));
  EXPECT_EQ(parseQuantity("200000000000000000000Ei").error(), QuantityError::OutOfRange);
}

TEST(Quantity, LongTextKeepsItsValue) {
  // More digits than 128 bits hold: the ones below a nano-unit only round.
  const std::string manyZeros = "1." + std::string(100, '0');
  EXPECT_EQ(nanos(manyZeros), tenTo(9));
  EXPECT_EQ(nanos(manyZeros + "1"), tenTo(9) + 1);
  EXPECT_EQ(nanos("0." + std::string(60, '0') + "1k"), 1);
  EXPECT_EQ(nanos(std::string(60, '0') + "42"), 42 * tenTo(9));
  EXPECT_EQ(nanos("1" + std::string(40, '0') + "e-40"), tenTo(9));
  EXPECT_EQ(milli(std::string(70, '0') + "1.5"), 1500) << "no length limit";
}

// Any int64 count of milli-units, written in any of the forms Kubernetes
// writes, reads back as itself.
TEST(Quantity, RandomMilliValuesRoundTripThroughTheirTextForms) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::int64_t> values(-INT64_MAX / 1000, INT64_MAX / 1000);
  for (int i = 0; i < 20000; ++i) {
    const std::int64_t m = values(rng);
    ASSERT_EQ(milli(std::to_string(m) + "m"), m);
    ASSERT_EQ(milli(std::to_string(m) + "e-3"), m);
    ASSERT_EQ(milli(std::to_string(m) + "000u"), m);
    const std::int64_t units = m / 1000;
    ASSERT_EQ(milli(std::to_string(units)), units * 1000);
    ASSERT_EQ(whole(std::to_string(units) + "000e-3"), units);
    if (units % 1024 == 0) {
      ASSERT_EQ(whole(std::to_string(units / 1024) + "Ki"), units);
    }
  }
}
