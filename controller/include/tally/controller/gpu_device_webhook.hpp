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
inline constexpr std::string_view kDefaultControllerIdentity = "system:serviceaccount:tally-system:tally-controller";
// Every refusal message starts with it, so a user of `kubectl apply` sees who refused.
inline constexpr std::string_view kRefusalPrefix = "tally: ";

struct GpuDeviceWebhookOptions {
  // The one identity allowed to change a GPUDevice's status (the binder's).
  std::string controllerIdentity = std::string(kDefaultControllerIdentity);
  // tally_controller_gpudevice_refusals_total{operation,code}: one per refusal
  // reason of an answer (an order can be refused for several). Null: not counted.
  observability::Family<observability::Counter>* refusals = nullptr;
};

// The family `refusals` expects, registered on `registry`.
observability::Family<observability::Counter>& gpuDeviceRefusalMetric(observability::Registry& registry);

// The answer to one review of a GPUDevice, decided on `snapshot` alone.
runtime::admission::AdmissionResponse reviewGpuDevice(const state::Snapshot& snapshot,
                                                      const runtime::admission::AdmissionRequest& request,
                                                      const GpuDeviceWebhookOptions& options);

// The handler of the route: each review reads the newest snapshot of `cell`.
runtime::admission::WebhookHandler gpuDeviceWebhook(const SnapshotCell<state::Snapshot>& cell,
                                                    GpuDeviceWebhookOptions options);

}  // namespace tally::controller
