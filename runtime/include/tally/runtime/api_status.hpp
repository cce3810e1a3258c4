#pragma once
// metav1.Status as the API server sends it in error bodies and watch ERROR
// events, and its mapping to typed errors.

#include <cstdint>
#include <string>
#include <string_view>

#include "tally/runtime/result.hpp"

namespace tally::runtime {

struct ApiStatus {
  int code = 0;
  std::string reason;
  std::string message;
  int retryAfterSeconds = 0;
};

// Best effort: a body that is not a Status yields code 0 and the body's start as message.
ApiStatus parseStatusJson(std::string_view body);
// `raw` is the Status message bytes (inside runtime.Unknown).
Result<ApiStatus> parseStatusProtobuf(std::string_view raw);

ErrorCode errorCodeForHttp(int httpStatus, std::string_view reason);
Error errorFromStatus(int httpStatus, const ApiStatus& status, int retryAfterHeader);

}  // namespace tally::runtime
