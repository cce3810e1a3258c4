#include "tally/runtime/api_status.hpp"

#include <simdjson.h>

#include "tally/common/proto_wire.hpp"

namespace tally::runtime {

ApiStatus parseStatusJson(std::string_view body) {
  ApiStatus st;
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  bool parsed = false;
  if (!parser.iterate(padded).get(doc) && !doc.get_object().get(obj)) {
    parsed = true;
    for (auto field : obj) {
      std::string_view key;
      if (field.unescaped_key().get(key)) {
        parsed = false;
        break;
      }
      if (key == "code") {
        int64_t c = 0;
        if (!field.value().get_int64().get(c)) st.code = static_cast<int>(c);
      } else if (key == "reason") {
        std::string_view s;
        if (!field.value().get_string().get(s)) st.reason = std::string(s);
      } else if (key == "message") {
        std::string_view s;
        if (!field.value().get_string().get(s)) st.message = std::string(s);
      } else if (key == "details") {
        simdjson::ondemand::object details;
        if (field.value().get_object().get(details)) continue;
        for (auto d : details) {
          std::string_view dk;
          if (d.unescaped_key().get(dk)) break;
          int64_t secs = 0;
          if (dk == "retryAfterSeconds" && !d.value().get_int64().get(secs)) {
            st.retryAfterSeconds = static_cast<int>(secs);
          }
        }
      }
    }
  }
  if (!parsed && st.message.empty()) st.message = std::string(body.substr(0, 256));
  return st;
}

Result<ApiStatus> parseStatusProtobuf(std::string_view raw) {
  ApiStatus st;
  proto::Reader r(raw);
  while (r.next()) {
    switch (r.field()) {
      case 3:
        if (r.isBytes()) st.message = std::string(r.bytes());
        break;
      case 4:
        if (r.isBytes()) st.reason = std::string(r.bytes());
        break;
      case 6:
        if (r.isVarint()) st.code = static_cast<int>(r.int64Value());
        break;
      case 5: {
        if (!r.isBytes()) break;
        proto::Reader d(r.bytes());
        while (d.next()) {
          if (d.field() == 5 && d.isVarint()) st.retryAfterSeconds = static_cast<int>(d.int64Value());
        }
        if (d.failed()) return Error(ErrorCode::kDecode, "malformed Status.details");
        break;
      }
      default: break;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed Status message");
  return st;
}

ErrorCode errorCodeForHttp(int httpStatus, std::string_view reason) {
  switch (httpStatus) {
    case 400: return ErrorCode::kBadRequest;
    case 401: return ErrorCode::kUnauthorized;
    case 403: return ErrorCode::kForbidden;
    case 404: return ErrorCode::kNotFound;
    case 409: return reason == "AlreadyExists" ? ErrorCode::kAlreadyExists : ErrorCode::kConflict;
    case 410: return ErrorCode::kGone;
    case 422: return ErrorCode::kInvalid;
    case 429: return ErrorCode::kTooManyRequests;
    default: break;
  }
  if (httpStatus >= 500 && httpStatus < 600) return ErrorCode::kServerError;
  if (reason == "Expired" || reason == "Gone") return ErrorCode::kGone;
  return ErrorCode::kHttp;
}

Error errorFromStatus(int httpStatus, const ApiStatus& status, int retryAfterHeader) {
  const int code = httpStatus != 0 ? httpStatus : status.code;
  Error err(errorCodeForHttp(code, status.reason), status.message.empty() ? status.reason : status.message);
  err.httpStatus = code;
  err.reason = status.reason;
  const int retryAfter = retryAfterHeader > 0 ? retryAfterHeader : status.retryAfterSeconds;
  err.retryAfter = std::chrono::seconds(retryAfter);
  return err;
}

}  // namespace tally::runtime
