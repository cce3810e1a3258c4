// The resource.k8s.io/v1 decoders and a GPUDeviceClass's spec.dra.
#include <gtest/gtest.h>

#include "decode_test_support.hpp"
#include "tally/model/dra.hpp"

namespace tally::codec {
namespace {

using testing::decodeError;
using testing::decodeOk;

TEST(ResourceSliceDecode, ReadsPoolDevicesAttributesCapacityTaintsAndCounters) {
  auto slice = decodeOk<ResourceSliceCodec>(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "gpu-h200-1-gpu.example.com-x7k2p", "resourceVersion": "7"},
    "spec": {"driver": "gpu.example.com", "nodeName": "gpu-h200-1",
             "pool": {"name": "gpu-h200-1", "generation": 3, "resourceSliceCount": 2},
             "sharedCounters": [{"name": "gpu-0-counters", "counters": {"memory": {"value": "141Gi"}}}],
             "devices": [
               {"name": "gpu-0",
                "attributes": {"gpu.example.com/productName": {"string": "H200"}, "index": {"int": 0},
                               "mig": {"bool": false}, "driverVersion": {"version": "1.2.3"}},
                "capacity": {"memory": {"value": "141Gi"}, "cores": {"value": "1500m"}},
                "allowMultipleAllocations": true,
                "taints": [{"key": "gpu.example.com/xid", "value": "79", "effect": "NoExecute"},
                           {"key": "note", "effect": "None"}]},
               {"name": "gpu-0-mig-1g",
                "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": {"memory": {"value": "17Gi"}}}]}]}})");
  EXPECT_EQ(slice.name, "gpu-h200-1-gpu.example.com-x7k2p");
  EXPECT_EQ(slice.driver, "gpu.example.com");
  EXPECT_EQ(slice.pool, "gpu-h200-1");
  EXPECT_EQ(slice.generation, 3);
  EXPECT_EQ(slice.resourceSliceCount, 2);
  EXPECT_EQ(slice.nodeName, "gpu-h200-1");
  ASSERT_EQ(slice.devices.size(), 2u);
  const auto& gpu = slice.devices[0];
  EXPECT_EQ(gpu.attributes.at("gpu.example.com/productName"), "H200");
  EXPECT_EQ(gpu.attributes.at("index"), "0");
  EXPECT_EQ(gpu.attributes.at("mig"), "false");
  EXPECT_EQ(gpu.attributes.at("driverVersion"), "1.2.3");
  EXPECT_EQ(gpu.capacity.at("memory").value, 141LL << 30);
  EXPECT_EQ(gpu.capacity.at("cores").value, 1) << "a capacity is rounded down";
  EXPECT_TRUE(gpu.allowMultipleAllocations);
  ASSERT_EQ(gpu.taints.size(), 2u);
  EXPECT_EQ(gpu.taints[0], (model::DraTaint{"gpu.example.com/xid", "79", model::DraTaintEffect::NoExecute}));
  EXPECT_EQ(gpu.taints[1].effect, model::DraTaintEffect::None);
  ASSERT_EQ(slice.sharedCounters.size(), 1u);
  EXPECT_EQ(slice.sharedCounters[0].counters.at("memory"), 141LL << 30);
  ASSERT_EQ(slice.devices[1].consumesCounters.size(), 1u);
  EXPECT_EQ(slice.devices[1].consumesCounters[0].counters.at("memory"), 17LL << 30);
}

TEST(ResourceSliceDecode, RefusesASliceWithoutDriverOrPoolAndABadQuantity) {
  auto noPool = decodeError<ResourceSliceCodec>(
      R"({"metadata": {"name": "s"}, "spec": {"driver": "gpu.example.com", "nodeName": "n"}})");
  EXPECT_NE(noPool.describe().find("driver and pool"), std::string::npos) << noPool.describe();
  auto bad = decodeError<ResourceSliceCodec>(R"({"metadata": {"name": "s"}, "spec": {"driver": "d",
    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "lots"}}}]}})");
  EXPECT_NE(bad.describe().find("devices[0]"), std::string::npos) << bad.describe();
  EXPECT_NE(bad.describe().find("memory"), std::string::npos) << bad.describe();
  auto negative = decodeError<ResourceSliceCodec>(R"({"metadata": {"name": "s"}, "spec": {"driver": "d",
    "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
    "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "-1Gi"}}}]}})");
  EXPECT_NE(negative.describe().find("negative"), std::string::npos) << negative.describe();
}

TEST(ResourceClaimDecode, ReadsRequestsAllocationNodeAndConsumers) {
  auto claim = decodeOk<ResourceClaimCodec>(R"({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "train-gpu-qskxc", "namespace": "acme-research", "uid": "u-1",
                 "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"}},
    "spec": {"devices": {"requests": [
      {"name": "gpu", "exactly": {"deviceClassName": "h200.example.com", "allocationMode": "ExactCount", "count": 2,
                                  "capacity": {"requests": {"memory": "35Gi"}}}},
      {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "h200.example.com"},
                                         {"name": "small", "deviceClassName": "l4.example.com", "count": 2}]},
      {"name": "all", "exactly": {"deviceClassName": "nic.example.com", "allocationMode": "All", "adminAccess": true}}]}},
    "status": {"allocation": {
        "devices": {"results": [
          {"request": "gpu", "driver": "gpu.example.com", "pool": "gpu-h200-1", "device": "gpu-0",
           "consumedCapacity": {"memory": "35Gi"}, "shareID": "s-1"},
          {"request": "any/big", "driver": "gpu.example.com", "pool": "gpu-h200-1", "device": "gpu-1",
           "adminAccess": false}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
          {"key": "metadata.name", "operator": "In", "values": ["gpu-h200-1"]}]}]}},
      "reservedFor": [{"resource": "pods", "name": "train", "uid": "p-1"}]}})");
  EXPECT_EQ(claim.ns, "acme-research");
  EXPECT_EQ(claim.name, "train-gpu-qskxc");
  EXPECT_EQ(claim.uid, "u-1");
  EXPECT_FALSE(claim.extendedResource);
  ASSERT_EQ(claim.requests.size(), 3u);
  ASSERT_EQ(claim.requests[0].choices.size(), 1u);
  EXPECT_EQ(claim.requests[0].choices[0].count, 2);
  EXPECT_EQ(claim.requests[0].choices[0].capacity.at("memory"), 35LL << 30);
  ASSERT_EQ(claim.requests[1].choices.size(), 2u);
  EXPECT_EQ(claim.requests[1].choices[1].name, "small");
  EXPECT_EQ(claim.requests[1].choices[1].count, 2);
  EXPECT_EQ(claim.requests[2].choices[0].mode, model::DraAllocationMode::All);
  EXPECT_TRUE(claim.requests[2].choices[0].adminAccess);
  EXPECT_TRUE(claim.allocated);
  EXPECT_EQ(claim.allocatedNode, "gpu-h200-1");
  ASSERT_EQ(claim.results.size(), 2u);
  EXPECT_EQ(claim.results[0].consumedCapacity.at("memory"), 35LL << 30);
  EXPECT_EQ(claim.results[1].request, "any/big");
  ASSERT_EQ(claim.reservedFor.size(), 1u);
  EXPECT_EQ(claim.reservedFor[0].uid, "p-1");
}

TEST(ResourceClaimDecode, KnowsTheSchedulersExtendedResourceClaimAndAnUnallocatedOne) {
  auto claim = decodeOk<ResourceClaimCodec>(R"({"metadata": {"name": "p-extended-resources-abcde",
    "namespace": "acme", "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
    "spec": {"devices": {"requests": [{"name": "container-0-request-0",
      "exactly": {"deviceClassName": "h200.example.com", "count": 1}}]}}, "status": {"allocation": null}})");
  EXPECT_TRUE(claim.extendedResource);
  EXPECT_FALSE(claim.allocated);
  auto bad = decodeError<ResourceClaimCodec>(R"({"metadata": {"name": "c", "namespace": "acme"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "x", "allocationMode": "Most"}}]}}})");
  EXPECT_NE(bad.describe().find("allocationMode"), std::string::npos) << bad.describe();
}

TEST(DeviceTaintRuleDecode, ReadsItsSelectorAndTaint) {
  auto rule = decodeOk<DeviceTaintRuleCodec>(R"({"metadata": {"name": "drain-gpu-3"},
    "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "gpu-h200-1", "device": "gpu-3"},
             "taint": {"key": "maintenance", "value": "rma", "effect": "NoSchedule"}}})");
  EXPECT_EQ(rule.name, "drain-gpu-3");
  EXPECT_EQ(rule.driver, "gpu.example.com");
  EXPECT_EQ(rule.pool, "gpu-h200-1");
  EXPECT_EQ(rule.device, "gpu-3");
  EXPECT_EQ(rule.taint, (model::DraTaint{"maintenance", "rma", model::DraTaintEffect::NoSchedule}));
}

TEST(DeviceClassDecode, ADraClassSellsUnderItsDeviceClasssExtendedResourceName) {
  auto cls = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h200-dra"},
    "spec": {"allocation": "passthrough", "memoryMiB": 144384, "maxCount": 8,
             "dra": {"driver": "gpu.example.com", "deviceClassName": "h200.example.com",
                     "attributes": {"productName": "H200"}}}})");
  ASSERT_TRUE(cls.dra);
  EXPECT_EQ(cls.dra->driver, "gpu.example.com");
  EXPECT_EQ(cls.dra->deviceClassName, "h200.example.com");
  EXPECT_EQ(cls.dra->attributes.at("productName"), "H200");
  EXPECT_EQ(cls.resourceName, "deviceclass.resource.kubernetes.io/h200.example.com");
  EXPECT_EQ(cls.nodeMode, model::NodeMode::Unset);
  EXPECT_EQ(cls.workload, model::Workload::Pod);
  auto named = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h200-dra"},
    "spec": {"allocation": "passthrough", "resourceName": "gpu.example.com/h200",
             "dra": {"driver": "gpu.example.com", "deviceClassName": "h200.example.com"}}})");
  EXPECT_EQ(named.resourceName, "gpu.example.com/h200");
  auto noDriver = decodeError<DeviceClassCodec>(
      R"({"metadata": {"name": "x"}, "spec": {"allocation": "passthrough", "dra": {"deviceClassName": "d"}}})");
  EXPECT_NE(noDriver.describe().find("spec.dra.driver"), std::string::npos) << noDriver.describe();
  auto vgpu = decodeError<DeviceClassCodec>(R"({"metadata": {"name": "x"},
    "spec": {"allocation": "vgpu", "dra": {"driver": "d", "deviceClassName": "d"}}})");
  EXPECT_NE(vgpu.describe().find("vgpu is not served by DRA"), std::string::npos) << vgpu.describe();
}

}  // namespace
}  // namespace tally::codec
