#pragma once
// Errors are values: every fallible runtime call returns Result<T>, which holds
// either the value or an Error carrying a code, the HTTP status and context.

#include <chrono>
#include <string>
#include <string_view>

#include "tally/common/expected.hpp"

namespace tally::runtime {

enum class ErrorCode {
  kNetwork,          // connect/read/write failed, connection closed
  kTimeout,          // a deadline passed
  kTls,              // handshake or certificate verification failed
  kCancelled,        // stopped by the caller
  kConfig,           // kubeconfig / in-cluster configuration problem
  kDecode,           // malformed JSON or protobuf, unexpected shape
  kBadRequest,       // 400
  kUnauthorized,     // 401
  kForbidden,        // 403
  kNotFound,         // 404
  kConflict,         // 409 reason Conflict (stale resourceVersion)
  kAlreadyExists,    // 409 reason AlreadyExists
  kGone,             // 410 (resourceVersion too old)
  kInvalid,          // 422
  kTooManyRequests,  // 429
  kServerError,      // 5xx
  kHttp,             // any other non-2xx status
  kInternal,
};

std::string_view errorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  int httpStatus = 0;
  std::string reason;  // metav1.Status reason when the server sent one
  std::chrono::seconds retryAfter{0};

  Error() = default;
  Error(ErrorCode c, std::string msg) : code(c), message(std::move(msg)) {}

  // Prefixes what the caller was doing: "get pods/ns/x: 404 ...".
  Error&& withContext(std::string_view what) && {
    message = std::string(what) + ": " + message;
    return std::move(*this);
  }
  std::string describe() const;
  bool is(ErrorCode c) const { return code == c; }
};

template <class T>
using Result = Expected<T, Error>;
using Status = Result<void>;

}  // namespace tally::runtime
