#include "tally/common/condition.hpp"

namespace tally {

const Condition* findCondition(const std::vector<Condition>& conditions, std::string_view type) {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool setCondition(std::vector<Condition>& conditions, Condition next, std::string_view now) {
  for (auto& c : conditions) {
    if (c.type != next.type) continue;
    next.lastTransitionTime =
        c.status == next.status && !c.lastTransitionTime.empty() ? c.lastTransitionTime : std::string(now);
    if (c == next) return false;
    c = std::move(next);
    return true;
  }
  next.lastTransitionTime = std::string(now);
  conditions.push_back(std::move(next));
  return true;
}

void writeConditions(JsonWriter& out, const std::vector<Condition>& conditions) {
  out.beginArray();
  for (const auto& c : conditions) {
    out.beginObject();
    out.field("type", c.type).field("status", c.status).field("reason", c.reason).field("message", c.message);
    out.field("lastTransitionTime", c.lastTransitionTime);
    if (c.observedGeneration > 0) out.field("observedGeneration", c.observedGeneration);
    out.endObject();
  }
  out.endArray();
}

}  // namespace tally
