#include "tally/runtime/admission/answer.hpp"

namespace tally::runtime::admission {

Answer Answer::patch(JsonPatch patch) {
  Answer a;
  if (!patch.empty()) a.response = AdmissionResponse::mutate(std::move(patch));
  return a;
}

Answer Answer::refuse(std::string code, int status, std::string message, std::string reason) {
  return refuse(std::vector<std::string>{std::move(code)}, status, std::move(message), std::move(reason));
}

Answer Answer::refuse(std::vector<std::string> codes, int status, std::string message, std::string reason) {
  return {AdmissionResponse::refuse(status, std::move(message), std::move(reason)), std::move(codes)};
}

}  // namespace tally::runtime::admission
