#include "tally/codec/admission_objects.hpp"

#include <gtest/gtest.h>

namespace tally::codec {
namespace {

simdjson::padded_string json(std::string_view text) { return simdjson::padded_string(text); }

// The GPUDevice webhook compares spec and status of the old and new objects
// by their text: every kind of value must come back whole.
TEST(RawMember, ReturnsObjectsArraysAndScalarsWhole) {
  EXPECT_EQ(rawMember(json(R"({"spec":{"class":"h200","count":1}})"), "spec"), R"({"class":"h200","count":1})");
  EXPECT_EQ(rawMember(json(R"({"spec":[1,2,3] })"), "spec"), "[1,2,3]");
  EXPECT_EQ(rawMember(json(R"({"spec":"text"})"), "spec"), R"("text")");
  EXPECT_EQ(rawMember(json(R"({"spec":7})"), "spec"), "7");
  EXPECT_EQ(rawMember(json(R"({"other":7})"), "spec"), std::nullopt);
  EXPECT_EQ(rawMember(json("not json"), "spec"), std::nullopt);
}

TEST(RawMember, TwoDifferentArraysDiffer) {
  EXPECT_NE(rawMember(json(R"({"status":[1]})"), "status"), rawMember(json(R"({"status":[2]})"), "status"));
  EXPECT_NE(rawMember(json(R"({"status":[]})"), "status"), rawMember(json(R"({"status":{}})"), "status"));
}

}  // namespace
}  // namespace tally::codec
