#pragma once
// Kubernetes quantity strings ("2", "2k", "1Gi", "1e3", "500m") as whole numbers.
// GPU resources are counted in whole units, so a value that is not a whole
// number ("0.5", "1500m") is refused rather than rounded.

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace tally::codec {

// The integer value of a quantity, or a message saying why it has none.
std::variant<std::int64_t, std::string> parseWholeQuantity(std::string_view text);

}  // namespace tally::codec
