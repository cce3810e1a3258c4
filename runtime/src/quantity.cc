#include "tally/runtime/quantity.h"

#include <cmath>
#include <cstdint>

namespace tally::runtime {

namespace {

__extension__ typedef __int128 i128;  // GCC and Clang builtin

// Exact integer path for the common forms ("8", "500m", "16Gi", "0.5", "1e3"):
// milli = ceil(mantissa * num / (den * 10^fraction)). nullopt when the form is
// unusual; the caller then takes the general path.
std::optional<int64_t> fastPath(std::string_view s) {
  size_t i = 0;
  int64_t mantissa = 0;
  int digits = 0;
  int fraction = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (++digits > 18) return std::nullopt;
      mantissa = mantissa * 10 + (c - '0');
      if (dot) ++fraction;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits == 0) return std::nullopt;
  const std::string_view suffix = s.substr(i);
  i128 num = 1000;
  i128 den = 1;
  auto pow10 = [](int n) {
    i128 v = 1;
    while (n-- > 0) v *= 10;
    return v;
  };
  if (suffix.empty()) {
  } else if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'm': num = 1; break;
      case 'u': num = 1; den = 1000; break;
      case 'n': num = 1; den = 1000000; break;
      case 'k': num = pow10(6); break;
      case 'M': num = pow10(9); break;
      case 'G': num = pow10(12); break;
      case 'T': num = pow10(15); break;
      case 'P': num = pow10(18); break;
      case 'E': num = pow10(21); break;
      default: return std::nullopt;
    }
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    const std::string_view bin = "KMGTPE";
    const auto pos = bin.find(suffix[0]);
    if (pos == std::string_view::npos) return std::nullopt;
    num = i128(1000) << (10 * (pos + 1));
  } else {
    return std::nullopt;
  }
  den *= pow10(fraction);
  const i128 value = (i128(mantissa) * num + den - 1) / den;
  if (value > i128(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

std::optional<int64_t> parseQuantityMilli(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  if (s[0] >= '0' && s[0] <= '9') {
    if (auto v = fastPath(s)) return v;
  }
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
