#include "tally/runtime/result.hpp"

namespace tally::runtime {

std::string_view errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNetwork: return "Network";
    case ErrorCode::kTimeout: return "Timeout";
    case ErrorCode::kTls: return "TLS";
    case ErrorCode::kCancelled: return "Cancelled";
    case ErrorCode::kConfig: return "Config";
    case ErrorCode::kDecode: return "Decode";
    case ErrorCode::kBadRequest: return "BadRequest";
    case ErrorCode::kUnauthorized: return "Unauthorized";
    case ErrorCode::kForbidden: return "Forbidden";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kConflict: return "Conflict";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kGone: return "Gone";
    case ErrorCode::kInvalid: return "Invalid";
    case ErrorCode::kTooManyRequests: return "TooManyRequests";
    case ErrorCode::kServerError: return "ServerError";
    case ErrorCode::kHttp: return "HTTP";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Error::describe() const {
  std::string out(errorCodeName(code));
  if (httpStatus != 0) out += " (" + std::to_string(httpStatus) + ")";
  out += ": ";
  out += message;
  return out;
}

}  // namespace tally::runtime
