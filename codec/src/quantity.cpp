#include "tally/codec/quantity.hpp"

#include <cctype>
#include <limits>

namespace tally::codec {
namespace {

__extension__ typedef __int128 Wide;

struct Suffix {
  int decimalExponent = 0;  // value x 10^decimalExponent
  int binaryExponent = 0;   // value x 2^binaryExponent
};

bool parseSuffix(std::string_view text, Suffix& out) {
  if (text.empty()) return true;
  static constexpr struct {
    std::string_view name;
    int binary;
  } kBinary[] = {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}};
  for (const auto& b : kBinary) {
    if (text == b.name) {
      out.binaryExponent = b.binary;
      return true;
    }
  }
  static constexpr struct {
    std::string_view name;
    int decimal;
  } kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"k", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18}};
  for (const auto& d : kDecimal) {
    if (text == d.name) {
      out.decimalExponent = d.decimal;
      return true;
    }
  }
  if (text.front() != 'e' && text.front() != 'E') return false;
  std::string_view digits = text.substr(1);
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 3) return false;
  int exponent = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    exponent = exponent * 10 + (c - '0');
  }
  out.decimalExponent = negative ? -exponent : exponent;
  return true;
}

bool multiplyChecked(Wide& value, Wide factor) {
  static constexpr Wide kLimit = (static_cast<Wide>(1) << 120);
  if (value != 0 && factor > kLimit / value) return false;
  value *= factor;
  return true;
}

}  // namespace

std::variant<std::int64_t, std::string> parseWholeQuantity(std::string_view text) {
  const std::string quoted = "quantity \"" + std::string(text) + "\"";
  std::string_view rest = text;
  bool negative = false;
  if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
    negative = rest.front() == '-';
    rest.remove_prefix(1);
  }
  // Digits with at most one decimal point, then the suffix.
  std::string digits;
  int fractionDigits = 0;
  bool seenPoint = false;
  bool seenDigit = false;
  std::size_t i = 0;
  for (; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '.' && !seenPoint) {
      seenPoint = true;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      seenDigit = true;
      if (digits.empty() && c == '0') {
        if (seenPoint) ++fractionDigits;
        continue;  // leading zeros carry no value
      }
      digits += c;
      if (seenPoint) ++fractionDigits;
    } else {
      break;
    }
  }
  if (!seenDigit) return quoted + " is malformed";
  Suffix suffix;
  if (!parseSuffix(rest.substr(i), suffix)) return quoted + " is malformed";
  // Trailing zeros after the point change nothing.
  while (fractionDigits > 0 && !digits.empty() && digits.back() == '0') {
    digits.pop_back();
    --fractionDigits;
  }
  if (digits.empty()) return std::int64_t{0};
  if (digits.size() > 36) return quoted + " is out of range";

  Wide numerator = 0;
  for (char c : digits) numerator = numerator * 10 + (c - '0');
  if (!multiplyChecked(numerator, static_cast<Wide>(1) << suffix.binaryExponent)) return quoted + " is out of range";
  int scale = suffix.decimalExponent - fractionDigits;
  for (; scale > 0; --scale) {
    if (!multiplyChecked(numerator, 10)) return quoted + " is out of range";
  }
  for (; scale < 0; ++scale) {
    if (numerator % 10 != 0) return quoted + " is not a whole number";
    numerator /= 10;
  }
  if (numerator > std::numeric_limits<std::int64_t>::max()) return quoted + " is out of range";
  auto value = static_cast<std::int64_t>(numerator);
  return negative ? -value : value;
}

}  // namespace tally::codec
