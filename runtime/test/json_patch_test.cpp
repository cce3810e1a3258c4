// The one JSON Patch: ops in order, pinned bodies, and the finalizer helpers
// the binder's writes use (a removal tested at its index first).

#include "tally/runtime/json_patch.hpp"

#include <gtest/gtest.h>

namespace tally::runtime {
namespace {

TEST(JsonPatch, APinnedBodyReplacesTheResourceVersionFirst) {
  JsonPatch p;
  p.addString("/metadata/labels/a", "x\"y");
  EXPECT_EQ(p.body("42"), R"([{"op":"replace","path":"/metadata/resourceVersion","value":"42"},)"
                          R"({"op":"add","path":"/metadata/labels/a","value":"x\"y"}])");
}

TEST(JsonPatch, AFinalizerIsAddedAsAListWhenThereIsNoneAndAppendedOtherwise) {
  EXPECT_EQ(JsonPatch().addFinalizer({}, "gpu.tally.dev/release").toJson(),
            R"([{"op":"add","path":"/metadata/finalizers","value":["gpu.tally.dev/release"]}])");
  EXPECT_EQ(JsonPatch().addFinalizer({"other"}, "gpu.tally.dev/release").toJson(),
            R"([{"op":"add","path":"/metadata/finalizers/-","value":"gpu.tally.dev/release"}])");
  EXPECT_TRUE(JsonPatch().addFinalizer({"gpu.tally.dev/release"}, "gpu.tally.dev/release").empty());
}

TEST(JsonPatch, AFinalizerIsRemovedAtItsIndexTestedFirst) {
  EXPECT_EQ(JsonPatch().removeFinalizer({"a", "gpu.tally.dev/release", "b"}, "gpu.tally.dev/release").toJson(),
            R"([{"op":"test","path":"/metadata/finalizers/1","value":"gpu.tally.dev/release"},)"
            R"({"op":"remove","path":"/metadata/finalizers/1"}])");
  EXPECT_TRUE(JsonPatch().removeFinalizer({"a"}, "gpu.tally.dev/release").empty());
}

}  // namespace
}  // namespace tally::runtime
