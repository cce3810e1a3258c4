#include "tally/runtime/quantity.h"

#include <cmath>

namespace tally::runtime {

std::optional<int64_t> parseQuantityMilli(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  size_t i = 0;
  bool negative = false;
  if (s[i] == '+' || s[i] == '-') negative = s[i++] == '-';
  // Mantissa as an exact integer plus a count of fractional digits.
  long double mantissa = 0;
  int fraction = 0;
  bool digits = false;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      mantissa = mantissa * 10 + (c - '0');
      if (dot) ++fraction;
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits) return std::nullopt;
  const std::string_view suffix = s.substr(i);
  long double scale = 1;
  if (suffix.empty()) {
  } else if (suffix == "m") {
    scale = 1e-3L;
  } else if (suffix == "u") {
    scale = 1e-6L;
  } else if (suffix == "n") {
    scale = 1e-9L;
  } else if (suffix == "k") {
    scale = 1e3L;
  } else if (suffix == "M") {
    scale = 1e6L;
  } else if (suffix == "G") {
    scale = 1e9L;
  } else if (suffix == "T") {
    scale = 1e12L;
  } else if (suffix == "P") {
    scale = 1e15L;
  } else if (suffix == "E") {
    scale = 1e18L;
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    const std::string_view bin = "KMGTPE";
    const auto pos = bin.find(suffix[0]);
    if (pos == std::string_view::npos) return std::nullopt;
    scale = std::pow(1024.0L, static_cast<long double>(pos + 1));
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    int exp = 0;
    bool expNeg = false;
    size_t j = 1;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) expNeg = suffix[j++] == '-';
    if (j == suffix.size()) return std::nullopt;
    for (; j < suffix.size(); ++j) {
      if (suffix[j] < '0' || suffix[j] > '9' || exp > 100) return std::nullopt;
      exp = exp * 10 + (suffix[j] - '0');
    }
    scale = std::pow(10.0L, static_cast<long double>(expNeg ? -exp : exp));
  } else {
    return std::nullopt;
  }
  long double milli = mantissa / std::pow(10.0L, static_cast<long double>(fraction)) * scale * 1000.0L;
  // Kubernetes rounds up to the next milli-unit.
  milli = std::ceil(milli - 1e-9L);
  if (milli > 9.2e18L) return std::nullopt;
  const auto value = static_cast<int64_t>(milli);
  return negative ? -value : value;
}

}  // namespace tally::runtime
