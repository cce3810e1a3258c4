// May a held device be deleted: not while a running VMI holds it.

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
#include "tally/model/admission.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct DeviceDeletion : ::testing::Test {
  Cluster c = syncedCluster();
  GpuDevice held = device("acme", "gpu-a", "h200", 2, DevicePhase::Attached, "gpu-1");
  VirtualMachineInstance vmi(std::string name, std::string phase, std::string uid = "") {
    VirtualMachineInstance v;
    v.ns = "acme";
    v.name = std::move(name);
    v.uid = std::move(uid);
    v.phase = std::move(phase);
    return v;
  }
};

TEST_F(DeviceDeletion, AttachedToARunningVmiIsRefusedNamingTheVmi) {
  held.attachedTo = {"acme", "train", "vmi-uid"};
  put(c, vmi("train", "Running", "vmi-uid"));
  auto d = checkDeviceDeletion(c, held);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::DeviceAttached);
  EXPECT_NE(d.refusals.front().message.find("vmi/acme/train"), std::string::npos) << d.summary();
  EXPECT_NE(d.refusals.front().message.find("gpudevice/acme/gpu-a"), std::string::npos) << d.summary();
}

TEST_F(DeviceDeletion, AttachedToAFinishedVmiMayGo) {
  held.attachedTo = {"acme", "train", ""};
  put(c, vmi("train", "Succeeded"));
  EXPECT_TRUE(checkDeviceDeletion(c, held).allowed());
}

TEST_F(DeviceDeletion, AttachedToAVmiThatIsGoneMayGo) {
  held.attachedTo = {"acme", "train", "vmi-uid"};
  EXPECT_TRUE(checkDeviceDeletion(c, held).allowed());
}

TEST_F(DeviceDeletion, AVmiOfTheSameNameButAnotherUidDoesNotHoldIt) {
  held.attachedTo = {"acme", "train", "old-uid"};
  put(c, vmi("train", "Running", "new-uid"));
  EXPECT_TRUE(checkDeviceDeletion(c, held).allowed());
}

TEST_F(DeviceDeletion, AStartingVmiNamingItInItsAnnotationHoldsIt) {
  held.phase = DevicePhase::Bound;
  auto v = vmi("train", "");
  v.heldDevices = {"gpu-a"};
  put(c, v);
  auto d = checkDeviceDeletion(c, held);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::DeviceAttached);
}

TEST_F(DeviceDeletion, AVmiInAnotherNamespaceNamingTheSameDeviceDoesNotHoldIt) {
  auto v = vmi("train", "Running");
  v.ns = "beta";
  v.heldDevices = {"gpu-a"};
  put(c, v);
  EXPECT_TRUE(checkDeviceDeletion(c, held).allowed());
}

TEST_F(DeviceDeletion, UnsyncedVmiCacheRefusesClosed) {
  c.caches.erase(Kind::VirtualMachineInstance);
  auto d = checkDeviceDeletion(c, held);
  ASSERT_FALSE(d.allowed());
  EXPECT_EQ(d.refusals.front().code, Code::CacheNotSynced);
}

}  // namespace
}  // namespace tally::model
