#pragma once
// Errors are values: every fallible runtime call returns Result<T>, which holds
// either the value or an Error carrying a code, the HTTP status and context.

#include <cassert>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

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
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT(implicit)
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { assert(!ok()); return std::get<1>(v_); }
  Error&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(implicit)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& { assert(!ok_); return error_; }
  Error&& error() && { assert(!ok_); return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace tally::runtime
