#include "tally/codec/quantity.hpp"

#include <gtest/gtest.h>

namespace tally::codec {
namespace {

std::int64_t whole(std::string_view text) {
  auto parsed = parseWholeQuantity(text);
  EXPECT_TRUE(std::holds_alternative<std::int64_t>(parsed)) << text << ": " << std::get<std::string>(parsed);
  return std::holds_alternative<std::int64_t>(parsed) ? std::get<std::int64_t>(parsed) : -1;
}

std::string refusal(std::string_view text) {
  auto parsed = parseWholeQuantity(text);
  EXPECT_TRUE(std::holds_alternative<std::string>(parsed)) << text;
  return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : "";
}

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

}  // namespace
}  // namespace tally::codec
