#pragma once
// resource.Quantity text ("500m", "16Gi", "2", "1e3") to an integer count of
// milli-units, the scale Kubernetes itself uses for requests.

#include <cstdint>
#include <optional>
#include <string_view>

namespace tally::runtime {

// nullopt for malformed input or values beyond int64 milli-units (> ~9.2e15).
std::optional<int64_t> parseQuantityMilli(std::string_view text);

}  // namespace tally::runtime
