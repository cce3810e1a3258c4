#pragma once
// How Tally's webhooks answer a refusal: "tally: " first, so a user of
// kubectl sees who refused; the model's reasons as "[Code] message" joined
// by "; "; 403 Forbidden for a decision, 422 Invalid for an unreadable object.

#include <string>

#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/refusal.hpp"
#include "tally/runtime/admission/review.hpp"

namespace tally::controller::detail {

inline runtime::admission::AdmissionResponse forbidden(const std::string& message) {
  return runtime::admission::AdmissionResponse::refuse(403, std::string(kRefusalPrefix) + message, "Forbidden");
}

inline runtime::admission::AdmissionResponse invalid(const std::string& message) {
  return runtime::admission::AdmissionResponse::refuse(422, std::string(kRefusalPrefix) + message, "Invalid");
}

// "[PoolInsufficient] pool h200 has 2 free unit(s); ...; [BudgetExceeded] ..."
inline std::string describe(const model::Decision& decision) {
  std::string out;
  for (const auto& r : decision.refusals) {
    if (!out.empty()) out += "; ";
    out += "[";
    out += model::toString(r.code);
    out += "] ";
    out += r.message;
  }
  return out;
}

}  // namespace tally::controller::detail
