#pragma once
// The GPUDeviceClass validating webhook (SPEC 3.5): acknowledgements of an
// audit failure (spec.gateAcknowledgements). On an UPDATE, every new or changed
// acknowledgement must name the requesting user as its identity, the failure id
// the class's status publishes now (status.gateFailureId), and an identity that
// has not acknowledged the same failure in the other role: one person cannot
// stand for both product and sre. Removing an acknowledgement is allowed. The
// webhook reads only the review (the old object's status is the class's
// current one) and writes nothing.

#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"

namespace tally::controller {

inline constexpr std::string_view kClassWebhookPath = "/validate/gpudeviceclasses";
inline constexpr std::string_view kClassWebhookName = "gpudeviceclasses";

struct Acknowledgement {
  std::string failureId, role, identity, at, note;
  friend bool operator==(const Acknowledgement&, const Acknowledgement&) = default;
};

// spec.gateAcknowledgements of a GPUDeviceClass object (JSON); an error names
// what cannot be read.
runtime::Result<std::vector<Acknowledgement>> decodeAcknowledgements(std::string_view objectJson);

runtime::admission::AdmissionResponse reviewDeviceClass(const runtime::admission::AdmissionRequest& request);

runtime::admission::WebhookHandler classWebhook();

}  // namespace tally::controller
