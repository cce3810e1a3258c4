#pragma once
// What a webhook's decision returns to its frame (webhook.hpp): the response
// the API server gets and the reason codes of a refusal, which the frame
// counts (tally_webhook_refusals_total{webhook,operation,code}, one per code).
// A refusal for several reasons (a model decision refused by two rules) names
// each of them once.

#include <string>
#include <vector>

#include "tally/runtime/admission/review.hpp"

namespace tally::runtime::admission {

struct Answer {
  AdmissionResponse response;
  std::vector<std::string> codes;  // empty on an allowed answer

  bool allowed() const { return response.allowed; }

  static Answer allow() { return {}; }
  // Allowed with `patch` (a mutator's; an empty patch is a plain allow).
  static Answer patch(JsonPatch patch);
  // Refused with the HTTP code, the message the client is shown and the
  // metav1.StatusReason, for one code or several.
  static Answer refuse(std::string code, int status, std::string message, std::string reason);
  static Answer refuse(std::vector<std::string> codes, int status, std::string message, std::string reason);
};

}  // namespace tally::runtime::admission
