#pragma once
// metav1.Condition, as Tally writes it into the status of its own objects:
// one entry per type, whose lastTransitionTime moves only when its status
// does (a new reason or message alone is not a transition).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/common/json.hpp"

namespace tally {

struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase
  std::string message;
  std::string lastTransitionTime;  // RFC 3339
  std::int64_t observedGeneration = 0;
  friend bool operator==(const Condition&, const Condition&) = default;
};

// The condition of `type`, or null.
const Condition* findCondition(const std::vector<Condition>& conditions, std::string_view type);

// Sets `next` (its lastTransitionTime is ignored) in `conditions`: added with
// `now` when the type is new, `now` again when the status changed, the old
// transition time kept otherwise. True when anything but nothing changed.
bool setCondition(std::vector<Condition>& conditions, Condition next, std::string_view now);

// Writes the list as a JSON array (the status.conditions value).
void writeConditions(JsonWriter& out, const std::vector<Condition>& conditions);

}  // namespace tally
