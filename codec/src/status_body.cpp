#include "tally/codec/status_body.hpp"

#include "json_reader.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"

namespace tally::codec {

using namespace detail;

std::string encodeStatusBody(const StatusBody& status) {
  JsonWriter json;
  json.beginObject()
      .field("code", std::int64_t{status.code})
      .field("reason", std::string_view(status.reason))
      .field("message", std::string_view(status.message))
      .endObject();
  return json.str();
}

Result<StatusBody> decodeStatusBody(std::string_view json) {
  StatusBody out;
  Status status = withJsonValue(json, "", [&](od::value value) -> Status {
    return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
      if (key == "reason") return readString(field, key, out.reason);
      if (key == "message") return readString(field, key, out.message);
      if (key != "code") return {};
      std::int64_t code = 0;
      if (auto read = readCount(field, key, code); !read) return read;
      out.code = static_cast<int>(code);
      return {};
    });
  });
  if (!status) return std::move(status).error();
  return out;
}

}  // namespace tally::codec
