#pragma once
// Kubernetes resource.Quantity text ("2", "500m", "16Gi", "1e3", ".5", "2E")
// read exactly: the value is kept as a 128-bit count of nano-units, the
// finest scale Kubernetes keeps, and finer digits round up (away from zero)
// as Kubernetes rounds them. No floating point, no allocation.
//
// Grammar: [+-] (digits | digits. | digits.digits | .digits) suffix, where
// suffix is empty, one of n u m k M G T P E, one of Ki Mi Gi Ti Pi Ei, or an
// exponent e/E with an optional sign and one to three digits ("E" alone is exa).

#include <cstdint>
#include <string>
#include <string_view>

#include "tally/common/expected.hpp"

namespace tally {

__extension__ typedef __int128 Int128;

enum class QuantityError {
  Malformed,   // not the grammar above
  OutOfRange,  // beyond the 128-bit nano-unit range, or the asked-for int64 scale
  NotWhole,    // a fraction where a whole number is asked for
};
// "is malformed" | "is out of range" | "is not a whole number"
std::string_view toString(QuantityError error);
// `quantity "<text>" is malformed` (and the other two).
std::string describeQuantityError(std::string_view text, QuantityError error);

class Quantity {
 public:
  static Quantity fromNanos(Int128 nanos) { return Quantity(nanos); }
  Int128 nanos() const { return nanos_; }
  // Milli-units rounded up away from zero, as Kubernetes' MilliValue().
  Expected<std::int64_t, QuantityError> milli() const;
  // The value in whole units; NotWhole for any fraction (never rounded).
  Expected<std::int64_t, QuantityError> whole() const;
  friend bool operator==(const Quantity&, const Quantity&) = default;

 private:
  explicit Quantity(Int128 nanos) : nanos_(nanos) {}
  Int128 nanos_;
};

Expected<Quantity, QuantityError> parseQuantity(std::string_view text);

// The two scales callers read: requests in milli-units (the runtime's
// decoders), device counts in whole units (GPUs are never fractional).
Expected<std::int64_t, QuantityError> parseQuantityMilli(std::string_view text);
Expected<std::int64_t, QuantityError> parseWholeQuantity(std::string_view text);

}  // namespace tally
