#include "tally/model/usage_records.hpp"

#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"

namespace tally::model {
namespace {
using namespace testing;

struct HeldVm : ::testing::Test {
  Cluster c = syncedCluster();
  void SetUp() override {
    put(c, passthroughClass());
    put(c, gpuNode("gpu-1", NodeMode::VmPassthrough, kH200, 4));
    VirtualMachineInstance vmi;
    vmi.ns = "t";
    vmi.name = "vm";
    vmi.uid = "uid-vm";
    vmi.activePods["uid-launcher"] = "gpu-1";
    put(c, vmi);
    auto d = device("t", "dev", "h200", 2, DevicePhase::Attached, "gpu-1");
    d.attachedTo = {"t", "vm", "uid-vm"};
    put(c, d);
    put(c, gpuPod("t", "launcher", kH200, 2, "gpu-1"));
  }
};

TEST_F(HeldVm, ALauncherIsNotBilledOnTopOfItsVmisDevices) {
  auto holders = holdersAt(c);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].kind, HolderKind::GpuDevice);
  EXPECT_EQ(holders[0].name, "dev");
  EXPECT_EQ(holders[0].units, 2);
  EXPECT_EQ(holders[0].className, "h200");
  EXPECT_EQ(holders[0].resource, kH200);
}

TEST_F(HeldVm, APodNoVmiListsIsBilledForWhatItRequests) {
  c.vmis.at("t/vm").activePods.clear();  // owner references prove nothing: only activePods does
  auto holders = holdersAt(c);
  ASSERT_EQ(holders.size(), 2u);  // sorted: pods first
  EXPECT_EQ(holders[0].kind, HolderKind::Pod);
  EXPECT_EQ(holders[0].name, "launcher");
  EXPECT_EQ(holders[0].units, 2);
  EXPECT_EQ(holders[1].kind, HolderKind::GpuDevice);
}

TEST_F(HeldVm, TerminalAndUnboundPodsAndUnheldDevicesBillNothing) {
  put(c, gpuPod("t", "done", kH200, 1, "gpu-1", PodPhase::Succeeded));
  put(c, gpuPod("t", "failed", kH200, 1, "gpu-1", PodPhase::Failed));
  put(c, gpuPod("t", "waiting", kH200, 1, ""));
  put(c, device("t", "pending", "h200", 1, DevicePhase::Pending));
  put(c, device("t", "released", "h200", 1, DevicePhase::Released, "gpu-1"));
  EXPECT_EQ(holdersAt(c).size(), 1u);
}

TEST(Accrue, UnitSecondsSplitAtUtcHours) {
  std::vector<Holder> holders{{HolderKind::GpuDevice, "t", "dev", "u", "h200", "r", 2}};
  const Timestamp hour = 1'800'000'000 - 1'800'000'000 % 3600;
  auto buckets = accrue(holders, hour + 3000, hour + 3600 + 900);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].hour, hour);
  EXPECT_EQ(buckets[0].unitSeconds, 2 * 600);
  EXPECT_EQ(buckets[1].hour, hour + 3600);
  EXPECT_EQ(buckets[1].unitSeconds, 2 * 900);
  EXPECT_TRUE(accrue(holders, hour, hour).empty());
  EXPECT_TRUE(accrue(holders, hour + 10, hour).empty());
}

TEST(Accrue, MergingSumsTheSameHourAndHolderOnce) {
  std::vector<Holder> holders{{HolderKind::Pod, "t", "p", "u", "", "r", 1}};
  auto first = accrue(holders, 7200, 7230);
  mergeBuckets(first, accrue(holders, 7230, 7260));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].unitSeconds, 60);
  EXPECT_EQ(bucketsIn(first, 7200, 10800).size(), 1u);
  EXPECT_TRUE(bucketsIn(first, 10800, 14400).empty());
  EXPECT_EQ(hourOf(-1), -3600);
  EXPECT_EQ(dayOf(86400 + 5), 86400);
}

constexpr Timestamp kLater = 1'800'000'000;  // a `now` past every period below

TEST(BillingWindows, FromActivatedAtToReleasedAtClippedAndNothingForPendingOrCanceled) {
  Ledger ledger;
  ledger.records.push_back(record("pending", "acme", "h200", 1, ReservationState::Pending));
  ledger.records.push_back(record("canceled", "acme", "h200", 1, ReservationState::Canceled));
  ledger.records.push_back(
      record("released", "acme", "h200", 2, ReservationState::Released));  // 1'700'000'100..1'700'100'000
  ledger.records.push_back(record("active", "acme", "h200", 3, ReservationState::Active));
  auto all = billingWindows(ledger, 0, 1'700'200'000, kLater);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "active");  // same activatedAt: by id
  EXPECT_TRUE(all[0].open);
  EXPECT_EQ(all[0].until, 1'700'200'000);
  EXPECT_EQ(all[0].deviceSeconds, 3 * (1'700'200'000 - 1'700'000'100));
  EXPECT_EQ(all[1].id, "released");
  EXPECT_FALSE(all[1].open);
  EXPECT_EQ(all[1].deviceSeconds, 2 * (1'700'100'000 - 1'700'000'100));
  auto clipped = billingWindows(ledger, 1'700'050'000, 1'700'060'000, kLater);
  ASSERT_EQ(clipped.size(), 2u);
  EXPECT_EQ(clipped[1].from, 1'700'050'000);
  EXPECT_EQ(clipped[1].deviceSeconds, 2 * 10'000);
  EXPECT_EQ(billingWindows(ledger, 1'700'100'000, 1'700'200'000, kLater).size(), 1u);  // released at the start: nothing
  EXPECT_TRUE(billingWindows(ledger, 0, 1'700'000'100, kLater).empty());               // before activation
}

TEST(BillingWindows, AnOpenWindowAskedAboutUntilAFutureMomentEndsAtNow) {
  Ledger ledger;
  ledger.records.push_back(record("active", "acme", "h200", 3, ReservationState::Active));  // activated 1'700'000'100
  const Timestamp now = 1'700'003'700;
  auto windows = billingWindows(ledger, 1'700'000'000, 1'700'086'400, now);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].open);
  EXPECT_EQ(windows[0].until, now);
  EXPECT_EQ(windows[0].deviceSeconds, 3 * 3600);
  // A period that ends before now is not stretched to it.
  EXPECT_EQ(billingWindows(ledger, 1'700'000'000, 1'700'001'900, now)[0].until, 1'700'001'900);
  // A period wholly ahead of now bills nothing yet.
  EXPECT_TRUE(billingWindows(ledger, now + 60, now + 3600, now).empty());
}

TEST(BillingWindows, AReleaseRecordedAheadOfTheClockBillsOnlyUpToNow) {
  Ledger ledger;
  ledger.records.push_back(
      record("released", "acme", "h200", 2, ReservationState::Released));  // 1'700'000'100..1'700'100'000
  auto windows = billingWindows(ledger, 0, 1'800'000'000, 1'700'000'200);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_FALSE(windows[0].open);
  EXPECT_EQ(windows[0].deviceSeconds, 2 * 100);
}

}  // namespace
}  // namespace tally::model
