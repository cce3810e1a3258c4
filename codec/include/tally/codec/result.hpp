#pragma once
// Decoding errors are values that name the item (kind, namespace/name or list
// index) and the JSON field path, so a person can find the broken line.

#include <string>
#include <string_view>

#include "tally/common/expected.hpp"

namespace tally::codec {

struct DecodeError {
  std::string item;     // "Pod tenant-a/launcher-x", "items[3]"
  std::string field;    // "spec.containers[0].resources.requests[nvidia.com/gpu]"
  std::string message;  // "quantity \"500m\" is not a whole number"

  // "items[3] Pod tenant-a/x: spec.containers[0]...: quantity ..."
  std::string describe() const;

  // Prefixes the field path with the enclosing field ("spec" + "nodeName").
  DecodeError&& under(std::string_view parent) &&;
  // Prefixes the item with its place ("items[3]" + "Pod a/b").
  DecodeError&& within(std::string_view place) &&;
};

// Joins a parent path and a child ("spec" + "containers[0]" -> "spec.containers[0]",
// "requests" + "[nvidia.com/gpu]" -> "requests[nvidia.com/gpu]").
std::string joinField(std::string_view parent, std::string_view child);

template <class T>
using Result = Expected<T, DecodeError>;
using Status = Result<void>;

}  // namespace tally::codec
