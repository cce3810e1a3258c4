#include "tally/codec/json_text.hpp"

#include <cstring>

#include "json_reader.hpp"

namespace tally::codec {

// The text is wrapped in "[...]" so the value is never a document root:
// simdjson treats root values specially, and every decoder reads nested values.
Status withJsonValue(std::string_view text, std::string_view field,
                     const std::function<Status(simdjson::ondemand::value)>& f) {
  using namespace detail;
  simdjson::padded_string padded(text.size() + 2);
  char* bytes = padded.data();
  bytes[0] = '[';
  std::memcpy(bytes + 1, text.data(), text.size());
  bytes[text.size() + 1] = ']';
  od::parser parser;
  od::document document;
  if (auto code = parser.iterate(padded).get(document)) return jsonError(code, field, "JSON");
  od::array array;
  if (auto code = document.get_array().get(array)) return jsonError(code, field, "JSON");
  std::size_t values = 0;
  for (auto entry : array) {
    od::value value;
    if (auto code = std::move(entry).get(value)) return jsonError(code, field, "JSON");
    if (values++ > 0) return fieldError(field, "unexpected content after the JSON value");
    Status status = f(value);
    if (!status) return status;
  }
  if (values == 0) return fieldError(field, "empty, expected JSON");
  if (document.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return fieldError(field, "unexpected content after the JSON value");
  }
  return {};
}

}  // namespace tally::codec
