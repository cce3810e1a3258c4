#pragma once
// How Tally's webhooks answer a refusal: "tally: " first, so a user of
// kubectl sees who refused; the model's reasons as "[Code] message" joined
// by "; "; 403 Forbidden for a decision, 422 Invalid for an unreadable object.
// Each answer names its codes for the frame's refusal metric.

#include <string>

#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/refusal.hpp"
#include "tally/runtime/admission/answer.hpp"

namespace tally::controller::detail {

using runtime::admission::Answer;

inline Answer forbidden(std::string code, const std::string& message) {
  return Answer::refuse(std::move(code), 403, std::string(kRefusalPrefix) + message, "Forbidden");
}

inline Answer invalid(std::string code, const std::string& message) {
  return Answer::refuse(std::move(code), 422, std::string(kRefusalPrefix) + message, "Invalid");
}

inline std::string codeName(model::Code code) { return std::string(model::toString(code)); }

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

// A decision the model refused: 403 with every reason, each code counted.
inline Answer refusedBy(const model::Decision& decision) {
  std::vector<std::string> codes;
  for (const auto& r : decision.refusals) codes.push_back(codeName(r.code));
  return Answer::refuse(std::move(codes), 403, std::string(kRefusalPrefix) + describe(decision), "Forbidden");
}

// A decision the model allowed passes; one it refused is refusedBy.
inline Answer answerOf(const model::Decision& decision) {
  return decision.allowed() ? Answer::allow() : refusedBy(decision);
}

}  // namespace tally::controller::detail
