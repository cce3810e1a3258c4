#include <gtest/gtest.h>

#include "decode_test_support.hpp"

namespace tally::codec {
namespace {

using testing::decodeError;
using testing::decodeOk;

TEST(DeviceClassDecode, ReadsEverySpecField) {
  auto cls = decodeOk<DeviceClassCodec>(R"({"apiVersion": "gpu.tally.dev/v1alpha1", "kind": "GPUDeviceClass",
    "metadata": {"name": "nvidia-v100-shared"},
    "spec": {"workload": "pod", "allocation": "shared", "resourceName": "nvidia.com/gpu", "nodeMode": "pod-hami",
             "memoryMiB": 32768, "maxCount": 2, "requiresEntitlement": true,
             "share": {"memoryMiB": 8192, "corePercent": 25, "maxSharesPerDevice": 4},
             "operatorSpareDevices": 2, "singleDevicePilotApproved": true, "pciVendorSelector": "10DE:1DB6",
             "gateAcknowledgements": [{"failureId": "f-1", "role": "product", "identity": "pat"},
                                      {"failureId": "f-1", "role": "sre", "identity": "sam"}]},
    "status": {"gateFailureId": "f-1", "conditions": [{"type": "InvariantHolds", "status": "True"},
                                                      {"type": "CreationOpen", "status": "False"}]}})");
  EXPECT_EQ(cls.name, "nvidia-v100-shared");
  EXPECT_EQ(cls.workload, model::Workload::Pod);
  EXPECT_EQ(cls.allocation, model::Allocation::Shared);
  EXPECT_EQ(cls.resourceName, "nvidia.com/gpu");
  EXPECT_EQ(cls.nodeMode, model::NodeMode::PodHami);
  EXPECT_EQ(cls.memoryMiB, 32768);
  EXPECT_EQ(cls.maxCount, 2);
  EXPECT_TRUE(cls.requiresEntitlement);
  EXPECT_EQ(cls.share, (model::SharePolicy{8192, 25, 4}));
  EXPECT_EQ(cls.operatorSpareDevices, 2);
  EXPECT_TRUE(cls.singleDevicePilotApproved);
  EXPECT_EQ(cls.pciVendorSelector, "10DE:1DB6");
  ASSERT_EQ(cls.acknowledgements.size(), 2u);
  EXPECT_EQ(cls.acknowledgements[1], (model::GateAcknowledgement{"f-1", "sre", "sam"}));
  EXPECT_EQ(cls.gateFailureId, "f-1");
  EXPECT_FALSE(cls.gateOpen);
  EXPECT_FALSE(cls.deleting);
}

TEST(DeviceClassDecode, DefaultsNodeModeFromAllocation) {
  auto vgpu = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "a"},
    "spec": {"workload": "vm", "allocation": "vgpu", "resourceName": "nvidia.com/A100-10C"}})");
  EXPECT_EQ(vgpu.nodeMode, model::NodeMode::VmVgpu);
  auto passthrough = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"},
    "spec": {"allocation": "passthrough", "resourceName": "nvidia.com/H200", "nodeMode": ""}})");
  EXPECT_EQ(passthrough.nodeMode, model::NodeMode::VmPassthrough);
  EXPECT_EQ(passthrough.workload, model::Workload::Vm);
  EXPECT_FALSE(passthrough.operatorSpareDevices.has_value());
  EXPECT_TRUE(passthrough.gateOpen);
}

TEST(DeviceClassDecode, CreationOpenTrueOpensAndUnknownCloses) {
  auto open = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "r"}, "status": {"conditions": [{"type": "CreationOpen", "status": "True"}]}})");
  EXPECT_TRUE(open.gateOpen);
  auto unknown = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "r"}, "status": {"conditions": [{"type": "CreationOpen", "status": "Unknown"}]}})");
  EXPECT_FALSE(unknown.gateOpen);
  EXPECT_TRUE(open.gateDecided);
  EXPECT_TRUE(unknown.gateDecided);
}

// No CreationOpen condition: no auditor has decided the pool (the doors close it).
TEST(DeviceClassDecode, AClassWithoutACreationOpenConditionIsUndecided) {
  auto fresh = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "r"}})");
  EXPECT_FALSE(fresh.gateDecided);
  auto other = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "r"}, "status": {"conditions": [{"type": "InvariantHolds", "status": "True"}]}})");
  EXPECT_FALSE(other.gateDecided);
}

TEST(DeviceClassDecode, ReadsTheGateControlsAndTheConditionMessage) {
  auto cls = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "habana.ai/gaudi2", "creationPaused": true, "keepCreationOpenDuringTransactions": true},
    "status": {"conditions": [{"type": "CreationOpen", "status": "False",
                               "message": "reservation gpu-res-7 is pending"}]}})");
  EXPECT_EQ(cls.resourceName, "habana.ai/gaudi2") << "a class may sell any vendor's extended resource";
  EXPECT_TRUE(cls.creationPaused);
  EXPECT_TRUE(cls.keepCreationOpenDuringTransactions);
  EXPECT_FALSE(cls.gateOpen);
  EXPECT_EQ(cls.gateReason, "reservation gpu-res-7 is pending");
  auto plain = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "passthrough",
    "resourceName": "r"}})");
  EXPECT_FALSE(plain.creationPaused);
  EXPECT_FALSE(plain.keepCreationOpenDuringTransactions);
}

TEST(DeviceClassDecode, DeletionTimestampMeansDeleting) {
  auto cls = decodeOk<DeviceClassCodec>(R"({"metadata": {"name": "h", "deletionTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"allocation": "passthrough", "resourceName": "r"}})");
  EXPECT_TRUE(cls.deleting);
}

TEST(DeviceClassDecode, UnknownEnumsAreErrorsNamingTheField) {
  auto allocation = decodeError<DeviceClassCodec>(
      R"({"metadata": {"name": "h"}, "spec": {"allocation": "mig", "resourceName": "r"}})");
  EXPECT_EQ(allocation.item, "GPUDeviceClass h");
  EXPECT_EQ(allocation.field, "spec.allocation");
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"workload": "batch"}})").field,
            "spec.workload");
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"nodeMode": "vm-turbo"}})").field,
            "spec.nodeMode");
}

TEST(DeviceClassDecode, RequiredFieldsAreNamed) {
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}})").field, "spec");
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"resourceName": "r"}})").field,
            "spec.allocation");
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "vgpu"}})").field,
            "spec.resourceName");
}

TEST(DeviceClassDecode, SharedClassNeedsASharePolicy) {
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "s"}, "spec": {"allocation": "shared",
    "resourceName": "nvidia.com/gpu"}})")
                .field,
            "spec.share");
  EXPECT_EQ(decodeError<DeviceClassCodec>(R"({"metadata": {"name": "s"}, "spec": {"allocation": "shared",
    "resourceName": "nvidia.com/gpu", "share": {"memoryMiB": 1024, "corePercent": 0}}})")
                .field,
            "spec.share.corePercent");
}

TEST(DeviceClassDecode, HugeMaxCountIsOutOfRange) {
  auto error = decodeError<DeviceClassCodec>(R"({"metadata": {"name": "h"}, "spec": {"allocation": "vgpu",
    "resourceName": "r", "maxCount": 99999999999999999999}})");
  EXPECT_EQ(error.field, "spec.maxCount");
  EXPECT_EQ(error.message, "number 99999999999999999999 is out of range");
}

TEST(GpuDeviceDecode, ReadsSpecStatusAndCreation) {
  auto device = decodeOk<GpuDeviceCodec>(R"({"apiVersion": "gpu.tally.dev/v1alpha1", "kind": "GPUDevice",
    "metadata": {"name": "train-gpus", "namespace": "acme", "uid": "d-1", "creationTimestamp": "2026-01-02T03:04:05Z"},
    "spec": {"class": "nvidia-h200-passthrough", "count": 2},
    "status": {"phase": "Attached", "node": "gpu-1",
               "attachedTo": {"namespace": "acme", "name": "vm", "uid": "vmi-1"},
               "conditions": [{"type": "Bound", "status": "True"}]}})");
  EXPECT_EQ(device.ns, "acme");
  EXPECT_EQ(device.name, "train-gpus");
  EXPECT_EQ(device.uid, "d-1");
  EXPECT_EQ(device.className, "nvidia-h200-passthrough");
  EXPECT_EQ(device.count, 2);
  EXPECT_EQ(device.phase, model::DevicePhase::Attached);
  EXPECT_EQ(device.node, "gpu-1");
  EXPECT_EQ(device.attachedTo, (model::ObjectRef{"acme", "vm", "vmi-1"}));
  EXPECT_EQ(device.created, 1767323045);
}

TEST(GpuDeviceDecode, ReadsTheAttachmentOfTheVmDoor) {
  auto device = decodeOk<GpuDeviceCodec>(R"({"metadata": {"name": "held", "namespace": "acme"},
    "spec": {"class": "h200"},
    "status": {"phase": "Attached", "node": "gpu-1",
               "attachedTo": {"namespace": "acme", "name": "vm", "uid": "", "token": "t0k",
                              "set": ["held", "vm-t0k-0"], "since": "2026-01-02T03:04:05Z"}}})");
  EXPECT_EQ(device.attachedTo, (model::ObjectRef{"acme", "vm", ""}));
  EXPECT_EQ(device.attachToken, "t0k");
  EXPECT_EQ(device.attachSet, (std::vector<std::string>{"held", "vm-t0k-0"}));
  EXPECT_EQ(device.attachedAt, 1767323045);
  EXPECT_FALSE(device.fromTemplate);
}

TEST(GpuDeviceDecode, ATemplateDeviceIsAttachedByItsAnnotationUntilItsStatusSaysSo) {
  const std::string annotation =
      R"("gpu.tally.dev/template-of": "{\"vmi\":\"vm\",\"token\":\"t0k\",\"set\":[\"held\",\"vm-t0k-0\"],\"since\":\"2026-01-02T03:04:05Z\"}")";
  auto fresh = decodeOk<GpuDeviceCodec>(R"({"metadata": {"name": "vm-t0k-0", "namespace": "acme", "annotations": {)" +
                                        annotation + R"(}}, "spec": {"class": "h200"}})");
  EXPECT_TRUE(fresh.fromTemplate);
  EXPECT_EQ(fresh.attachedTo, (model::ObjectRef{"", "vm", ""}));
  EXPECT_EQ(fresh.attachToken, "t0k");
  EXPECT_EQ(fresh.attachSet.size(), 2u);
  EXPECT_EQ(fresh.attachedAt, 1767323045);
  // The status, once written, is the attachment (the uid recorded).
  auto later = decodeOk<GpuDeviceCodec>(R"({"metadata": {"name": "vm-t0k-0", "namespace": "acme", "annotations": {)" +
                                        annotation + R"(}}, "spec": {"class": "h200"},
    "status": {"phase": "Attached", "node": "n", "attachedTo": {"name": "vm", "uid": "u-1", "token": "t0k"}}})");
  EXPECT_TRUE(later.fromTemplate);
  EXPECT_EQ(later.attachedTo.uid, "u-1");
  EXPECT_TRUE(later.attachSet.empty());
  // A broken annotation is an error naming it.
  auto error = decodeError<GpuDeviceCodec>(
      R"({"metadata": {"name": "x", "namespace": "acme", "annotations": {"gpu.tally.dev/template-of": "{\"since\": 5}"}},
          "spec": {"class": "h200"}})");
  EXPECT_NE(error.field.find("gpu.tally.dev/template-of"), std::string::npos) << error.field;
  EXPECT_EQ(decodeError<GpuDeviceCodec>(R"({"metadata": {"name": "x"}, "spec": {"class": "h200"},
    "status": {"attachedTo": {"name": "vm", "since": "soon"}}})")
                .field,
            "status.attachedTo.since");
}

TEST(GpuDeviceDecode, WithoutStatusIsPendingAndCountDefaultsToOne) {
  auto device = decodeOk<GpuDeviceCodec>(R"({"metadata": {"name": "d", "namespace": "n"}, "spec": {"class": "c"}})");
  EXPECT_EQ(device.phase, model::DevicePhase::Pending);
  EXPECT_EQ(device.count, 1);
  EXPECT_TRUE(device.attachedTo.empty());
}

TEST(GpuDeviceDecode, EveryPhaseIsRead) {
  for (auto [text, phase] :
       {std::pair{"Bound", model::DevicePhase::Bound}, std::pair{"Lost", model::DevicePhase::Lost},
        std::pair{"Released", model::DevicePhase::Released}, std::pair{"Pending", model::DevicePhase::Pending}}) {
    auto device = decodeOk<GpuDeviceCodec>(std::string(R"({"metadata": {"name": "d"}, "spec": {"class": "c"},
      "status": {"phase": ")") + text + "\"}}");
    EXPECT_EQ(device.phase, phase) << text;
  }
}

TEST(GpuDeviceDecode, UnknownPhaseIsAnErrorNamingTheDevice) {
  auto error = decodeError<GpuDeviceCodec>(R"({"metadata": {"name": "d", "namespace": "acme"}, "spec": {"class": "c"},
    "status": {"phase": "Borrowed"}})");
  EXPECT_EQ(error.item, "GPUDevice acme/d");
  EXPECT_EQ(error.field, "status.phase");
  EXPECT_NE(error.message.find("Borrowed"), std::string::npos);
}

TEST(GpuDeviceDecode, BadCreationTimestampAndMissingClassAreErrors) {
  EXPECT_EQ(decodeError<GpuDeviceCodec>(R"({"metadata": {"name": "d", "creationTimestamp": "yesterday"},
    "spec": {"class": "c"}})")
                .field,
            "metadata.creationTimestamp");
  EXPECT_EQ(decodeError<GpuDeviceCodec>(R"({"metadata": {"name": "d"}, "spec": {"count": 1}})").field, "spec.class");
  EXPECT_EQ(decodeError<GpuDeviceCodec>(R"({"metadata": {"name": "d"}, "spec": {"class": "c", "count": "two"}})").field,
            "spec.count");
}

TEST(VirtualMachineInstanceDecode, GpusActivePodsAndDeviceAnnotations) {
  auto vmi = decodeOk<VirtualMachineInstanceCodec>(R"({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
    "metadata": {"name": "vm", "namespace": "acme", "uid": "vmi-1", "annotations": {
      "gpu.tally.dev/devices": "[\"held-a\",\"held-b\"]",
      "gpu.tally.dev/device-templates": "[{\"class\":\"nvidia-h200-passthrough\",\"count\":2}]",
      "gpu.tally.dev/attachment": "t0k"}},
    "spec": {"domain": {"cpu": {"cores": 8}, "devices": {"disks": [], "gpus": [
      {"name": "gpu0", "deviceName": "nvidia.com/H200"}, {"name": "gpu1", "deviceName": "nvidia.com/H200"}]}}},
    "status": {"phase": "Running", "activePods": {"pod-uid-1": "gpu-1", "pod-uid-2": "gpu-2"}}})");
  EXPECT_EQ(vmi.uid, "vmi-1");
  ASSERT_EQ(vmi.gpus.size(), 2u);
  EXPECT_EQ(vmi.gpus[1], (model::VmiGpu{"gpu1", "nvidia.com/H200"}));
  EXPECT_EQ(vmi.activePods, (std::map<std::string, std::string>{{"pod-uid-1", "gpu-1"}, {"pod-uid-2", "gpu-2"}}));
  EXPECT_EQ(vmi.heldDevices, (std::vector<std::string>{"held-a", "held-b"}));
  ASSERT_EQ(vmi.deviceTemplates.size(), 1u);
  EXPECT_EQ(vmi.deviceTemplates[0], (model::DeviceTemplate{"nvidia-h200-passthrough", 2}));
  EXPECT_EQ(vmi.phase, "Running");
  EXPECT_EQ(vmi.attachToken, "t0k");
}

TEST(VirtualMachineInstanceDecode, DeviceNamesMayBeCommaSeparated) {
  auto names = decodeDeviceNames(" held-a, held-b ,held-c");
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, (std::vector<std::string>{"held-a", "held-b", "held-c"}));
  EXPECT_FALSE(decodeDeviceNames("a,,b"));
  EXPECT_FALSE(decodeDeviceNames("a,"));
  EXPECT_FALSE(decodeDeviceNames("[\"a\", 1]"));
  EXPECT_TRUE(decodeDeviceNames("")->empty());
}

TEST(VirtualMachineInstanceDecode, MalformedTemplatesNameTheVmiAndAnnotation) {
  auto error = decodeError<VirtualMachineInstanceCodec>(R"({"metadata": {"name": "vm", "namespace": "acme",
    "annotations": {"gpu.tally.dev/device-templates": "[{\"class\":\"c\",\"count\":1.5}]"}}})");
  EXPECT_EQ(error.item, "VirtualMachineInstance acme/vm");
  EXPECT_EQ(error.field, "metadata.annotations[gpu.tally.dev/device-templates][0].count");
  auto missing = decodeError<VirtualMachineInstanceCodec>(R"({"metadata": {"name": "vm",
    "annotations": {"gpu.tally.dev/device-templates": "[{\"count\":1}]"}}})");
  EXPECT_EQ(missing.field, "metadata.annotations[gpu.tally.dev/device-templates][0].class");
}

TEST(VirtualMachineInstanceDecode, ActivePodsOfWrongTypeNameThePod) {
  auto error = decodeError<VirtualMachineInstanceCodec>(R"({"metadata": {"name": "vm"},
    "status": {"activePods": {"pod-uid-1": 5}}})");
  EXPECT_EQ(error.field, "status.activePods.pod-uid-1");
}

TEST(KubeVirtDecode, PermittedPciAndMediatedDevices) {
  auto devices = decodeOk<KubeVirtCodec>(R"({"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
    "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
    "spec": {"configuration": {"developerConfiguration": {"featureGates": ["GPU"]}, "permittedHostDevices": {
      "mediatedDevices": [{"mdevNameSelector": "GRID A100-10C", "resourceName": "nvidia.com/A100-10C"}],
      "pciHostDevices": [{"pciVendorSelector": "10DE:2335", "resourceName": "nvidia.com/H200",
                          "externalResourceProvider": true}]}}}})");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0], (model::PermittedHostDevice{"nvidia.com/H200", "10DE:2335", false, true}));
  EXPECT_EQ(devices[1], (model::PermittedHostDevice{"nvidia.com/A100-10C", "GRID A100-10C", true, false}));
}

TEST(KubeVirtDecode, EntryWithoutResourceNameIsAnError) {
  auto error = decodeError<KubeVirtCodec>(R"({"metadata": {"name": "kubevirt"}, "spec": {"configuration": {
    "permittedHostDevices": {"pciHostDevices": [{"pciVendorSelector": "10DE:2335"}]}}}})");
  EXPECT_EQ(error.item, "KubeVirt kubevirt");
  EXPECT_EQ(error.field, "spec.configuration.permittedHostDevices.pciHostDevices[0].resourceName");
}

}  // namespace
}  // namespace tally::codec

namespace tally::codec {
namespace {

Result<GpuDeviceRecord> decodeRecord(std::string_view text) {
  std::optional<GpuDeviceRecord> out;
  Status status = withJsonValue(text, "", [&](simdjson::ondemand::value json) -> Status {
    auto decoded = decodeGpuDeviceRecord(json);
    if (!decoded) return std::move(decoded).error();
    out = std::move(decoded).value();
    return {};
  });
  if (!status) return std::move(status).error();
  return std::move(*out);
}

TEST(GpuDeviceRecordDecode, ReadsFinalizersConditionsAndTheResourceVersion) {
  auto record = decodeRecord(R"({"metadata": {"name": "d", "namespace": "t", "uid": "u", "resourceVersion": "17",
    "generation": 2, "finalizers": ["gpu.tally.dev/release"], "deletionTimestamp": "2026-12-01T00:00:00Z"},
    "spec": {"class": "h200", "count": 2},
    "status": {"phase": "Bound", "node": "n1", "conditions": [{"type": "Bound", "status": "True",
      "reason": "Placed", "message": "on n1", "lastTransitionTime": "2026-12-01T00:00:00Z",
      "observedGeneration": 2}]}})");
  ASSERT_TRUE(record) << record.error().describe();
  EXPECT_EQ(record->device.name, "d");
  EXPECT_EQ(record->device.phase, model::DevicePhase::Bound);
  EXPECT_EQ(record->device.node, "n1");
  EXPECT_TRUE(record->device.deleting);
  EXPECT_EQ(record->meta.resourceVersion, "17");
  EXPECT_EQ(record->meta.generation, 2);
  EXPECT_TRUE(record->meta.hasFinalizer("gpu.tally.dev/release"));
  ASSERT_EQ(record->conditions.size(), 1u);
  EXPECT_EQ(record->conditions[0], (Condition{"Bound", "True", "Placed", "on n1", "2026-12-01T00:00:00Z", 2}));
}

TEST(GpuDeviceRecordDecode, ABrokenConditionIsNamedByIndex) {
  auto record = decodeRecord(R"({"metadata": {"name": "d", "namespace": "t"}, "spec": {"class": "h"},
    "status": {"conditions": [{"type": "Bound"}, {"type": 7}]}})");
  ASSERT_FALSE(record);
  EXPECT_NE(record.error().describe().find("status.conditions[1].type"), std::string::npos)
      << record.error().describe();
}

}  // namespace
}  // namespace tally::codec
