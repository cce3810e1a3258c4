#include "json_reader.hpp"

#include <string>

#include "tally/common/quantity.hpp"

namespace tally::codec::detail {

DecodeError fieldError(std::string_view field, std::string message) {
  DecodeError error;
  error.field = std::string(field);
  error.message = std::move(message);
  return error;
}

DecodeError jsonError(simdjson::error_code code, std::string_view field, std::string_view expected) {
  switch (code) {
    case simdjson::INCORRECT_TYPE: return fieldError(field, "expected " + std::string(expected));
    case simdjson::NUMBER_OUT_OF_RANGE: return fieldError(field, "number out of range");
    case simdjson::NUMBER_ERROR: return fieldError(field, "malformed number");
    default: return fieldError(field, std::string("malformed JSON: ") + simdjson::error_message(code));
  }
}

std::string keyField(std::string_view key) {
  if (key.find_first_of("./[] ") == std::string_view::npos && !key.empty()) return std::string(key);
  std::string field = "[";
  field += key;
  field += ']';
  return field;
}

std::string indexField(std::size_t index) { return "[" + std::to_string(index) + "]"; }

Result<bool> isNull(od::value& value, std::string_view field) {
  bool null = false;
  if (auto code = value.is_null().get(null)) return jsonError(code, field, "a value");
  return null;
}

Status readString(od::value value, std::string_view field, std::string& out) {
  auto null = isNull(value, field);
  if (!null) return std::move(null).error();
  if (*null) {
    out.clear();
    return {};
  }
  std::string_view text;
  if (auto code = value.get_string().get(text)) return jsonError(code, field, "a string");
  out.assign(text);
  return {};
}

Status readBool(od::value value, std::string_view field, bool& out) {
  auto null = isNull(value, field);
  if (!null) return std::move(null).error();
  if (*null) {
    out = false;
    return {};
  }
  if (auto code = value.get_bool().get(out)) return jsonError(code, field, "true or false");
  return {};
}

// Why a JSON number is no int64: a fraction or exponent, or too many digits.
DecodeError numberError(od::value& value, std::string_view field) {
  std::string_view token = value.raw_json_token();
  while (!token.empty() &&
         (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' || token.back() == '\t')) {
    token.remove_suffix(1);
  }
  const bool fractional = token.find_first_of(".eE") != std::string_view::npos;
  return fieldError(field,
                    "number " + std::string(token) + (fractional ? " is not a whole number" : " is out of range"));
}

Status readCount(od::value value, std::string_view field, std::int64_t& out) {
  od::json_type type;
  if (auto code = value.type().get(type)) return jsonError(code, field, "a whole number");
  std::int64_t amount = 0;
  if (type == od::json_type::null) return {};
  if (type == od::json_type::number) {
    if (value.get_int64().get(amount)) return numberError(value, field);
  } else if (type == od::json_type::string) {
    std::string_view text;
    if (auto code = value.get_string().get(text)) return jsonError(code, field, "a quantity");
    auto parsed = parseWholeQuantity(text);
    if (!parsed) return fieldError(field, describeQuantityError(text, parsed.error()));
    amount = *parsed;
  } else {
    return fieldError(field, "expected a whole number or a quantity string");
  }
  if (amount < 0) return fieldError(field, "negative amount " + std::to_string(amount));
  out = amount;
  return {};
}

Status readPresence(od::value value, std::string_view field, bool& out) {
  auto null = isNull(value, field);
  if (!null) return std::move(null).error();
  out = !*null;
  return {};
}

}  // namespace tally::codec::detail
