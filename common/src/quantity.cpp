#include "tally/common/quantity.hpp"

#include <limits>

namespace tally {
namespace {

constexpr int kMaxPow10 = 38;  // 10^38 < 2^127 - 1 < 10^39

constexpr Int128 pow10(int n) {
  Int128 v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

bool multiplyChecked(Int128& value, Int128 factor) { return !__builtin_mul_overflow(value, factor, &value); }

struct Suffix {
  int decimalExponent = 0;  // value x 10^decimalExponent
  int binaryExponent = 0;   // value x 2^binaryExponent
};

Expected<Suffix, QuantityError> parseSuffix(std::string_view text) {
  if (text.empty()) return Suffix{};
  if (text.size() == 2 && text[1] == 'i') {
    constexpr std::string_view kBinary = "KMGTPE";
    const auto at = kBinary.find(text[0]);
    if (at == std::string_view::npos) return QuantityError::Malformed;
    return Suffix{0, 10 * static_cast<int>(at + 1)};
  }
  if (text.size() == 1) {
    switch (text[0]) {
      case 'n': return Suffix{-9, 0};
      case 'u': return Suffix{-6, 0};
      case 'm': return Suffix{-3, 0};
      case 'k': return Suffix{3, 0};
      case 'M': return Suffix{6, 0};
      case 'G': return Suffix{9, 0};
      case 'T': return Suffix{12, 0};
      case 'P': return Suffix{15, 0};
      case 'E': return Suffix{18, 0};
      default: break;
    }
  }
  if (text.front() != 'e' && text.front() != 'E') return QuantityError::Malformed;
  std::string_view digits = text.substr(1);
  bool negative = false;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 3) return QuantityError::Malformed;
  int exponent = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return QuantityError::Malformed;
    exponent = exponent * 10 + (c - '0');
  }
  return Suffix{negative ? -exponent : exponent, 0};
}

// ceil(value / 10^n) for value >= 0; `inexact` says digits below value were
// already dropped (they are not zero).
Int128 divideRoundingUp(Int128 value, int n, bool inexact) {
  if (n > kMaxPow10) return value > 0 || inexact ? 1 : 0;
  const Int128 divisor = pow10(n);
  Int128 q = value / divisor;
  if (value % divisor != 0 || inexact) ++q;
  return q;
}

}  // namespace

std::string_view toString(QuantityError error) {
  switch (error) {
    case QuantityError::Malformed: return "is malformed";
    case QuantityError::OutOfRange: return "is out of range";
    case QuantityError::NotWhole: return "is not a whole number";
  }
  return "is malformed";
}

std::string describeQuantityError(std::string_view text, QuantityError error) {
  std::string out = "quantity \"";
  out += text;
  out += "\" ";
  out += toString(error);
  return out;
}

Expected<Quantity, QuantityError> parseQuantity(std::string_view text) {
  std::string_view rest = text;
  bool negative = false;
  if (!rest.empty() && (rest.front() == '+' || rest.front() == '-')) {
    negative = rest.front() == '-';
    rest.remove_prefix(1);
  }
  // The significant digits as one integer; once one more would overflow, the
  // rest only move the scale (before the point) or mark the value inexact.
  Int128 mantissa = 0;
  int scale = 0;  // value = mantissa x 10^scale (before the suffix)
  bool seenPoint = false;
  bool seenDigit = false;
  bool inexact = false;
  bool full = false;
  std::size_t i = 0;
  for (; i < rest.size(); ++i) {
    const char c = rest[i];
    if (c == '.' && !seenPoint) {
      seenPoint = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    seenDigit = true;
    const int digit = c - '0';
    if (!full) {
      Int128 next = mantissa;
      if (multiplyChecked(next, 10) && !__builtin_add_overflow(next, digit, &next)) {
        mantissa = next;
        if (seenPoint) --scale;
        continue;
      }
      full = true;
    }
    if (!seenPoint) ++scale;
    if (digit != 0) inexact = true;
  }
  if (!seenDigit) return QuantityError::Malformed;
  const auto suffix = parseSuffix(rest.substr(i));
  if (!suffix) return suffix.error();
  if (mantissa == 0 && !inexact) return Quantity::fromNanos(0);

  // In nano-units: mantissa x 2^binary x 10^(scale + decimal + 9), rounded up.
  Int128 nanos = mantissa;
  if (!multiplyChecked(nanos, static_cast<Int128>(1) << suffix->binaryExponent)) return QuantityError::OutOfRange;
  const int exponent = scale + suffix->decimalExponent + 9;
  if (exponent >= 0) {
    // A digit that did not fit sits at a nano-unit or above: too big.
    if (full && exponent > 0) return QuantityError::OutOfRange;
    if (exponent > kMaxPow10 || !multiplyChecked(nanos, pow10(exponent))) return QuantityError::OutOfRange;
    if (inexact && __builtin_add_overflow(nanos, 1, &nanos)) return QuantityError::OutOfRange;
  } else {
    nanos = divideRoundingUp(nanos, -exponent, inexact);
  }
  return Quantity::fromNanos(negative ? -nanos : nanos);
}

Expected<std::int64_t, QuantityError> Quantity::milli() const {
  const Int128 magnitude = nanos_ < 0 ? -nanos_ : nanos_;
  const Int128 milli = divideRoundingUp(magnitude, 6, false);
  if (milli > std::numeric_limits<std::int64_t>::max()) return QuantityError::OutOfRange;
  const auto value = static_cast<std::int64_t>(milli);
  return nanos_ < 0 ? -value : value;
}

Expected<std::int64_t, QuantityError> Quantity::whole() const {
  constexpr Int128 kNanosPerUnit = 1'000'000'000;
  if (nanos_ % kNanosPerUnit != 0) return QuantityError::NotWhole;
  const Int128 units = nanos_ / kNanosPerUnit;
  // Symmetric, so that a negative amount out of range reads as one too.
  if (units > std::numeric_limits<std::int64_t>::max() || units < -std::numeric_limits<std::int64_t>::max()) {
    return QuantityError::OutOfRange;
  }
  return static_cast<std::int64_t>(units);
}

Expected<std::int64_t, QuantityError> parseQuantityMilli(std::string_view text) {
  auto q = parseQuantity(text);
  if (!q) return q.error();
  return q->milli();
}

Expected<std::int64_t, QuantityError> parseWholeQuantity(std::string_view text) {
  auto q = parseQuantity(text);
  if (!q) return q.error();
  return q->whole();
}

}  // namespace tally
