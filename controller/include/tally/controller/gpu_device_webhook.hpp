#pragma once
// The GPUDevice validating webhook (SPEC 3.6): a CREATE is an order the model
// checks on this replica's snapshot (refused closed while a cache has not
// synced); spec is immutable; status is Tally's alone to write; a device a
// running VMI holds is not deleted. The webhook writes nothing, so a dry run
// gets the same answer and leaves no trace.

#include <string>

#include "tally/common/snapshot_cell.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::controller {

inline constexpr std::string_view kGpuDeviceWebhookPath = "/validate/gpudevices";
// The value of the frame's webhook label (tally_webhook_refusals_total{webhook}).
inline constexpr std::string_view kGpuDeviceWebhookName = "gpudevices";
inline constexpr std::string_view kDefaultControllerIdentity = "system:serviceaccount:tally-system:tally-controller";
// Every refusal message starts with it, so a user of `kubectl apply` sees who refused.
inline constexpr std::string_view kRefusalPrefix = "tally: ";

struct GpuDeviceWebhookOptions {
  // The one identity allowed to change a GPUDevice's status (the binder's).
  std::string controllerIdentity = std::string(kDefaultControllerIdentity);
  // Refusals: the frame counts every reason of one in
  // tally_webhook_refusals_total{webhook="gpudevices",operation,code}.
};

// The answer to one review of a GPUDevice, decided on `snapshot` alone.
runtime::admission::Answer reviewGpuDevice(const state::Snapshot& snapshot,
                                           const runtime::admission::AdmissionRequest& request,
                                           const GpuDeviceWebhookOptions& options);

// The route's validator: each review reads the newest snapshot of `cell`.
runtime::admission::Validator gpuDeviceWebhook(const SnapshotCell<state::Snapshot>& cell,
                                               GpuDeviceWebhookOptions options);

}  // namespace tally::controller
