#pragma once
// RFC 3339 timestamps, the text form of Kubernetes' metav1.Time and MicroTime
// and of the ledger's dates. Parsing takes any offset and any number of
// fraction digits (nanoseconds kept, the rest cut); formatting always writes
// UTC with 'Z' and a fixed number of fraction digits. Pure: no clock is read.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tally/common/expected.hpp"

namespace tally {

// An instant as Unix seconds and the nanoseconds within that second.
struct UnixTime {
  std::int64_t seconds = 0;
  std::int32_t nanos = 0;  // [0, 1e9)
  friend bool operator==(const UnixTime&, const UnixTime&) = default;
};

// Why a text is not an RFC 3339 timestamp, quoting it.
struct TimeParseError {
  std::string message;
  const std::string& describe() const { return message; }
};

// "2026-01-02T03:04:05Z", "2026-01-02t03:04:05.5+01:00", ... A leap second
// (:60) reads as the second after :59.
Expected<UnixTime, TimeParseError> parseRfc3339(std::string_view text);

// "2026-01-02T03:04:05Z" with fractionDigits == 0, "...05.678Z" with 3,
// "...05.678000Z" with 6 (0 to 9; digits beyond are cut, never rounded).
std::string formatRfc3339(UnixTime t, int fractionDigits = 0);
inline std::string formatRfc3339(std::int64_t unixSeconds) { return formatRfc3339(UnixTime{unixSeconds, 0}); }

// The instant a system_clock time point names, floored to whole nanoseconds.
UnixTime toUnixTime(std::chrono::system_clock::time_point t);

}  // namespace tally
