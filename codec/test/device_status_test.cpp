// What the doors write into a GPUDevice reads back as what they meant: the
// status the binder and the VM door write, the device the VM door creates from
// a VMI's template, and the gpus entries it answers a VMI with.

#include <gtest/gtest.h>

#include "tally/codec/device_status.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/codec/objects.hpp"
#include "tally/codec/vmi_devices.hpp"

namespace tally::codec {
namespace {

GpuDeviceRecord readBack(const std::string& json) {
  std::optional<GpuDeviceRecord> out;
  Status status = withJsonValue(json, "", [&](simdjson::ondemand::value v) -> Status {
    auto decoded = decodeGpuDeviceRecord(v);
    if (!decoded) return std::move(decoded).error();
    out = std::move(decoded).value();
    return {};
  });
  EXPECT_TRUE(status) << status.error().describe() << "\n" << json;
  return out.value_or(GpuDeviceRecord{});
}

std::string deviceWithStatus(const std::string& status) {
  return R"({"apiVersion":"gpu.tally.dev/v1alpha1","kind":"GPUDevice",)"
         R"("metadata":{"name":"held","namespace":"alpha","uid":"u-1","resourceVersion":"7","generation":2},)"
         R"("spec":{"class":"h200","count":2},"status":)" +
         status + "}";
}

TEST(DeviceStatusWrite, TheStatusReadsBackAsWritten) {
  model::GpuDevice d;
  d.phase = model::DevicePhase::Attached;
  d.node = "gpu-1";
  d.attachedTo = {"alpha", "vm \"one\"", "uid-vm"};
  d.attachToken = "tok";
  d.attachSet = {"held", "vm-gpu-0"};
  d.attachedAt = 1'800'000'000;
  std::vector<Condition> conditions{{"Bound", "True", "Placed", "placed on node gpu-1", "", 2}};
  const GpuDeviceRecord back = readBack(deviceWithStatus(encodeGpuDeviceStatus(d, conditions, 2)));
  EXPECT_EQ(back.device.phase, model::DevicePhase::Attached);
  EXPECT_EQ(back.device.node, "gpu-1");
  EXPECT_EQ(back.device.attachedTo, d.attachedTo);
  EXPECT_EQ(back.device.attachToken, "tok");
  EXPECT_EQ(back.device.attachSet, d.attachSet);
  EXPECT_EQ(back.device.attachedAt, d.attachedAt);
  ASSERT_EQ(back.conditions.size(), 1u);
  EXPECT_EQ(back.conditions[0].reason, "Placed");
  EXPECT_EQ(back.conditions[0].observedGeneration, 2);
}

TEST(DeviceStatusWrite, AnUnplacedDeviceWritesNoNodeAndNoAttachment) {
  model::GpuDevice d;
  d.phase = model::DevicePhase::Pending;
  const std::string json = encodeGpuDeviceStatus(d, {}, 0);
  EXPECT_EQ(json.find("node"), std::string::npos) << json;
  EXPECT_EQ(json.find("attachedTo"), std::string::npos) << json;
  EXPECT_EQ(json.find("observedGeneration"), std::string::npos) << json;
  const GpuDeviceRecord back = readBack(deviceWithStatus(json));
  EXPECT_EQ(back.device.phase, model::DevicePhase::Pending);
  EXPECT_TRUE(back.device.attachedTo.empty());
}

TEST(DeviceStatusWrite, ATemplateDeviceReadsBackAsItsVmisPendingAttachment) {
  const std::string json = encodeTemplateGpuDevice(
      {"alpha", "vm-gpu-0", "h200", 2, "gpu.tally.dev/release", "vm", "tok", {"held", "vm-gpu-0"}, 1'800'000'000});
  const GpuDeviceRecord back = readBack(json);
  EXPECT_EQ(back.device.ns, "alpha");
  EXPECT_EQ(back.device.name, "vm-gpu-0");
  EXPECT_EQ(back.device.className, "h200");
  EXPECT_EQ(back.device.count, 2);
  EXPECT_TRUE(back.device.fromTemplate);
  EXPECT_EQ(back.device.attachedTo.name, "vm");
  EXPECT_EQ(back.device.attachToken, "tok");
  EXPECT_EQ(back.device.attachSet, (std::vector<std::string>{"held", "vm-gpu-0"}));
  EXPECT_EQ(back.device.attachedAt, 1'800'000'000);
  EXPECT_TRUE(back.meta.hasFinalizer("gpu.tally.dev/release"));
}

TEST(VmiGpusWrite, OthersEntriesAreKeptAndTallysReplaceTheirNames) {
  DomainDevices domain;
  domain.hasDomain = domain.hasDevices = true;
  domain.gpus = {{"mine", R"({"name":"mine","deviceName":"old"})"},
                 {"theirs", R"({"name":"theirs","deviceName":"x"})"}};
  EXPECT_EQ(encodeVmiGpus(domain, {{"mine", "nvidia.com/H200"}, {"gpu2", "nvidia.com/H200"}}),
            R"([{"name":"theirs","deviceName":"x"},{"name":"mine","deviceName":"nvidia.com/H200"},)"
            R"({"name":"gpu2","deviceName":"nvidia.com/H200"}])");
  domain.hasDevices = false;
  domain.gpus.clear();
  EXPECT_EQ(encodeVmiGpus(domain, {{"g", "d"}}), R"({"gpus":[{"name":"g","deviceName":"d"}]})");
}

}  // namespace
}  // namespace tally::codec
