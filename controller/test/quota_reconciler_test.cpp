// The quota controller's reading of what the API server holds (spec.hard and
// the keys Tally's field manager owns) and the bodies it writes.

#include "tally/controller/quota_reconciler.hpp"

#include <gtest/gtest.h>

namespace tally::controller {
namespace {

const std::string kKey = "requests.nvidia.com/GH100_H200_SXM_141GB";

// An HRQ as the API server returns it after Tally applied its key and kubectl
// (an Update) set requests.cpu.
const std::string kHrq = R"({"apiVersion":"hnc.x-k8s.io/v1alpha2","kind":"HierarchicalResourceQuota",
 "metadata":{"name":"plan-quota","namespace":"acme","managedFields":[
  {"manager":"tally-controller","operation":"Apply","apiVersion":"hnc.x-k8s.io/v1alpha2","fieldsType":"FieldsV1",
   "fieldsV1":{"f:spec":{"f:hard":{"f:requests.nvidia.com/GH100_H200_SXM_141GB":{},"f:requests.nvidia.com/gpu":{}}}}},
  {"manager":"kubectl-patch","operation":"Update","fieldsType":"FieldsV1",
   "fieldsV1":{"f:spec":{"f:hard":{"f:requests.cpu":{}}}}},
  {"manager":"tally-controller","operation":"Update","subresource":"status","fieldsType":"FieldsV1",
   "fieldsV1":{"f:status":{}}}]},
 "spec":{"hard":{"requests.cpu":"10","requests.nvidia.com/GH100_H200_SXM_141GB":"3","requests.nvidia.com/gpu":"0"}}})";

TEST(ObserveQuota, ReadsSpecHardAndOnlyTheKeysTallyApplied) {
  auto observed = observeQuota(kHrq, "tally-controller");
  ASSERT_TRUE(observed) << observed.error().describe();
  EXPECT_TRUE(observed->exists);
  EXPECT_EQ(observed->hard.at("requests.cpu"), "10");
  EXPECT_EQ(observed->hard.at(kKey), "3");
  EXPECT_EQ(observed->owned, (std::set<std::string>{kKey, "requests.nvidia.com/gpu"}));
}

TEST(ObserveQuota, AnotherManagerOwnsNothingOfTallys) {
  auto observed = observeQuota(kHrq, "someone-else");
  ASSERT_TRUE(observed);
  EXPECT_TRUE(observed->owned.empty());
}

TEST(ObserveQuota, NoJsonIsAnError) { EXPECT_FALSE(observeQuota("not json", "tally-controller")); }

TEST(QuotaConverged, EqualValuesOwnedByTallyAreConverged) {
  auto observed = observeQuota(kHrq, "tally-controller").value();
  model::ResourceList desired;
  desired.set(kKey, 3);
  desired.set("requests.nvidia.com/gpu", 0);
  EXPECT_TRUE(quotaConverged(observed, desired));
}

TEST(QuotaConverged, AHandEditedValueIsNot) {
  auto observed = observeQuota(kHrq, "tally-controller").value();
  observed.hard[kKey] = "7";
  model::ResourceList desired;
  desired.set(kKey, 3);
  desired.set("requests.nvidia.com/gpu", 0);
  EXPECT_FALSE(quotaConverged(observed, desired));
}

TEST(QuotaConverged, QuantitiesCompareByValue) {
  ObservedQuota observed{true, {{kKey, "3000m"}}, {kKey}};
  EXPECT_TRUE(quotaConverged(observed, model::ResourceList{{kKey, 3}}));
}

TEST(QuotaConverged, AKeyTallyStillOwnsButNoLongerWantsIsNot) {
  auto observed = observeQuota(kHrq, "tally-controller").value();
  EXPECT_FALSE(quotaConverged(observed, model::ResourceList{{kKey, 3}}));
}

TEST(QuotaConverged, AKeySomeoneElseSetToTheSameValueIsNotYetTallys) {
  ObservedQuota observed{true, {{kKey, "3"}}, {}};
  EXPECT_FALSE(quotaConverged(observed, model::ResourceList{{kKey, 3}}));
}

TEST(QuotaConverged, AMissingObjectIsConvergedOnlyWithNothingToWrite) {
  EXPECT_TRUE(quotaConverged(ObservedQuota{}, model::ResourceList{}));
  model::ResourceList zero;
  zero.set(kKey, 0);  // a limit of 0 is still a key to write
  EXPECT_FALSE(quotaConverged(ObservedQuota{}, zero));
}

TEST(ApplyBody, HoldsOnlyTallysKeysWithZerosKept) {
  model::ResourceList hard;
  hard.set(kKey, 3);
  hard.set("requests.nvidia.com/gpu", 0);
  EXPECT_EQ(hrqApplyBody("acme", hard),
            R"({"apiVersion":"hnc.x-k8s.io/v1alpha2","kind":"HierarchicalResourceQuota","metadata":{"name":)"
            R"("plan-quota","namespace":"acme"},"spec":{"hard":{"requests.nvidia.com/GH100_H200_SXM_141GB":"3",)"
            R"("requests.nvidia.com/gpu":"0"}}})");
}

TEST(ApplyBody, AnEmptyProjectCapAppliesNoSpecSoTallysKeysGo) {
  EXPECT_EQ(resourceQuotaApplyBody("acme-ml", {}),
            R"({"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"project-quota","namespace":"acme-ml"}})");
}

TEST(StatusPatch, WritesEveryDimensionAndNullsProfilesNoLongerThere) {
  std::map<std::string, model::AcceleratorUsage> observed, desired;
  observed["gone"].devices = model::HardUsed{1, 0};
  desired["h200"].devices = model::HardUsed{3, 2};
  EXPECT_EQ(acceleratorStatusPatch(observed, desired),
            R"({"status":{"quotaUsage":{"accelerators":{"h200":{"shares":null,"memoryMiB":null,"corePercent":null,)"
            R"("devices":{"hard":3,"used":2}},"gone":null}}}})");
}

}  // namespace
}  // namespace tally::controller
