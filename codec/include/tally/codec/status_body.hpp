#pragma once
// The body of an error answer of Tally's own HTTP endpoints (GET /options,
// GET /usage), in the shape of the API server's Status errors, and its
// reader (what a client of those endpoints, and their tests, read back).
//
//   {"code":403,"reason":"Forbidden","message":"user u may not ..."}

#include <string>
#include <string_view>

#include "tally/codec/result.hpp"

namespace tally::codec {

struct StatusBody {
  int code = 0;
  std::string reason;
  std::string message;
  friend bool operator==(const StatusBody&, const StatusBody&) = default;
};

std::string encodeStatusBody(const StatusBody& status);
// Refused: not a JSON object, or a member of another type.
Result<StatusBody> decodeStatusBody(std::string_view json);

}  // namespace tally::codec
