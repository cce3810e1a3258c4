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

namespace tally::codec {
namespace {

constexpr std::string_view kPin = R"({"key":"metadata.name","operator":"In","values":["gpu-2"]})";
const std::string kTerms =
    "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";

RequiredAffinity affinityOf(const std::string& pod) {
  return readRequiredAffinity(simdjson::padded_string(pod), "gpu-2");
}

TEST(NodePinEdits, PodWithoutAffinityGetsTheWholeAffinity) {
  auto edits = nodePinEdits(affinityOf(R"({"spec":{}})"), "gpu-2");
  ASSERT_EQ(edits.size(), 1u);
  EXPECT_EQ(edits[0].path, "/spec/affinity");
  EXPECT_EQ(edits[0].valueJson, R"({"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":)"
                                R"({"nodeSelectorTerms":[{"matchFields":[)" +
                                    std::string(kPin) + "]}]}}}");
}

TEST(NodePinEdits, EveryTermButAnEmptyOneIsPinnedOnce) {
  const std::string pod =
      R"({"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[)"
      R"({"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]},{},)"
      R"({"matchFields":[{"key":"x","operator":"In","values":["y"]}]}]}}}}})";
  auto edits = nodePinEdits(affinityOf(pod), "gpu-2");
  ASSERT_EQ(edits.size(), 2u);
  EXPECT_EQ(edits[0], (PatchEdit{PatchEdit::Op::kAdd, kTerms + "/0/matchFields", "[" + std::string(kPin) + "]"}));
  EXPECT_EQ(edits[1], (PatchEdit{PatchEdit::Op::kAdd, kTerms + "/2/matchFields/-", std::string(kPin)}));
}

TEST(NodePinEdits, WhatThePinWritesReadsBackAsPinned) {
  const std::string pod =
      R"({"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[)"
      R"({"matchFields":[)" +
      std::string(kPin) + "]}]}}}}}";
  RequiredAffinity affinity = affinityOf(pod);
  ASSERT_EQ(affinity.terms.size(), 1u);
  EXPECT_TRUE(affinity.terms[0].pinned);
  EXPECT_TRUE(nodePinEdits(affinity, "gpu-2").empty());
}

TEST(NodePinEdits, SchedulerAndNodeNameEdits) {
  EXPECT_EQ(schedulerNameEdit("tally-\"x\""),
            (PatchEdit{PatchEdit::Op::kAdd, "/spec/schedulerName", R"("tally-\"x\"")"}));
  EXPECT_EQ(nodeNameRemoval(), (PatchEdit{PatchEdit::Op::kRemove, "/spec/nodeName", ""}));
}

TEST(ContainerResourceEdits, WhatIsAbsentIsAddedWholeAndWhatIsThereGetsTheResource) {
  auto edits = [](std::string_view pod) { return firstContainerResourceEdits(json(pod), "gpu.tally.dev/claims", "1"); };
  auto bare = edits(R"({"spec":{"containers":[{"name":"a"},{"name":"b"}]}})");
  ASSERT_TRUE(bare.error.empty()) << bare.error;
  ASSERT_EQ(bare.edits.size(), 1u);
  EXPECT_EQ(bare.edits[0].path, "/spec/containers/0/resources");
  EXPECT_EQ(bare.edits[0].valueJson,
            R"({"requests":{"gpu.tally.dev/claims":"1"},"limits":{"gpu.tally.dev/claims":"1"}})");
  auto both = edits(R"({"spec":{"containers":[{"resources":{"requests":{"cpu":"1"},"limits":{"memory":"1Gi"}}}]}})");
  ASSERT_EQ(both.edits.size(), 2u);
  EXPECT_EQ(both.edits[0].path, "/spec/containers/0/resources/requests/gpu.tally.dev~1claims");
  EXPECT_EQ(both.edits[0].valueJson, R"("1")");
  EXPECT_EQ(both.edits[1].path, "/spec/containers/0/resources/limits/gpu.tally.dev~1claims");
  auto nulls = edits(R"({"spec":{"containers":[{"resources":{"requests":null}}]}})");
  ASSERT_EQ(nulls.edits.size(), 2u);
  EXPECT_EQ(nulls.edits[0].path, "/spec/containers/0/resources/requests");
  EXPECT_EQ(nulls.edits[1].path, "/spec/containers/0/resources/limits");
}

TEST(ContainerResourceEdits, APodWithoutAContainerOrOfAnotherShapeIsAnError) {
  auto edits = [](std::string_view pod) { return firstContainerResourceEdits(json(pod), "gpu.tally.dev/claims", "1"); };
  for (std::string_view bad :
       {R"({"spec":{"containers":[]}})", R"({"spec":{"containers":{}}})", R"({"spec":{"containers":[7]}})",
        R"({"spec":7})", R"([1])", R"({"spec":{"containers":[{"resources":[]}]}})"}) {
    auto out = edits(bad);
    EXPECT_FALSE(out.error.empty()) << bad;
    EXPECT_TRUE(out.edits.empty()) << bad;
  }
}

TEST(DecodeAdmittedPod, GenerateNamePodIsReadUnnamedOnlyWhenAllowed) {
  const simdjson::padded_string pod(
      std::string(R"({"metadata":{"generateName":"virt-launcher-","namespace":"t"},"spec":{"containers":[]}})"));
  auto strict = decodeAdmittedPod(pod, "t", "", {});
  EXPECT_NE(strict.error.find("the created Pod cannot be read"), std::string::npos) << strict.error;
  EXPECT_NE(strict.error.find("metadata.name"), std::string::npos) << strict.error;
  auto generated = decodeAdmittedPod(pod, "t", "", {.allowGenerateName = true});
  EXPECT_TRUE(generated.error.empty()) << generated.error;
  EXPECT_EQ(generated.value.ns, "t");
  EXPECT_TRUE(generated.value.name.empty());
}

TEST(DecodeAdmittedPod, AGenerateNamePodStillRefusesWhatIsNoPod) {
  const simdjson::padded_string pod(std::string(R"({"metadata":{"generateName":"p-"},"spec":{"containers":7}})"));
  auto generated = decodeAdmittedPod(pod, "t", "", {.allowGenerateName = true});
  EXPECT_NE(generated.error.find("containers"), std::string::npos) << generated.error;
}

}  // namespace
}  // namespace tally::codec
