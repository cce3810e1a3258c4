#pragma once
// Sums and products of figures read from objects anyone may write (claims,
// slices, quotas): they saturate at the int64 range, never wrap.

#include <cstdint>

namespace tally::model::detail {

inline std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? INT64_MAX : INT64_MIN;
  return out;
}

inline std::int64_t saturatingMultiply(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
  return out;
}

}  // namespace tally::model::detail
