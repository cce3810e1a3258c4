#pragma once
// A GPUDevice's status as Tally writes it (the binder and the VM door alike):
// phase, node, the attachment with its token, set and time,
// observedGeneration and conditions. Both write all of it, pinned to the
// resourceVersion they read, so neither drops what the other wrote; it reads
// back as decodeGpuDeviceRecord (objects.hpp) reads it.
//
// And the GPUDevice the VM door creates from a VMI's template.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/common/condition.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec {

std::string encodeGpuDeviceStatus(const model::GpuDevice& device, const std::vector<Condition>& conditions,
                                  std::int64_t generation);

// A GPUDevice of `className` x `count` named `name` in `ns` that the VM door
// makes from VMI `vmi`'s template, created with `finalizer` and the
// gpu.tally.dev/template-of annotation (the VMI, the attachment's token, its
// set and time), which decodeGpuDeviceRecord reads back as the device's
// attachment.
struct TemplateGpuDevice {
  std::string ns, name, className;
  std::int64_t count = 0;
  std::string finalizer;
  std::string vmi, token;
  std::vector<std::string> set;
  model::Timestamp since = 0;
};
std::string encodeTemplateGpuDevice(const TemplateGpuDevice& device);

}  // namespace tally::codec
