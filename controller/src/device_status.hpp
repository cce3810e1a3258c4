#pragma once
// The GPUDevices the binder and the VM door read and write: their resource,
// and the codec adapter that decodes a GET, PATCH or LIST answer with the
// metadata and conditions a pinned write needs (codec::decodeGpuDeviceRecord;
// what they write is codec::encodeGpuDeviceStatus).

#include <string>

#include "tally/codec/objects.hpp"
#include "tally/model/objects.hpp"
#include "tally/runtime/client.hpp"
#include "tally/state/watch_codec.hpp"

namespace tally::controller::detail {

inline const runtime::Resource& devicesResource() {
  static const runtime::Resource r = runtime::Resource::of("gpu.tally.dev", "v1alpha1", "gpudevices");
  return r;
}

// GET, PATCH and LIST bodies decoded with the metadata and conditions a write needs.
using RecordCodec = state::GpuDeviceRecordCodec;

}  // namespace tally::controller::detail
