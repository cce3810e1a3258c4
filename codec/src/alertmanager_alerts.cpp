#include "tally/codec/alertmanager_alerts.hpp"

#include <fmt/format.h>
#include <simdjson.h>

namespace tally::codec {

Expected<std::vector<model::ActiveAlert>, std::string> parseAlerts(std::string_view json, std::string_view poolLabel) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc)) {
    return std::string("the answer is not JSON: ") + simdjson::error_message(err);
  }
  simdjson::dom::array items;
  if (doc.get(items)) return std::string("the answer is not a JSON array of alerts");
  std::vector<model::ActiveAlert> out;
  std::size_t index = 0;
  for (auto item : items) {
    simdjson::dom::object alert;
    if (item.get(alert)) return fmt::format("alert {} is not an object", index);
    simdjson::dom::object labels;
    if (alert["labels"].get(labels)) return fmt::format("alert {} has no labels object", index);
    simdjson::dom::element state;
    if (!alert["status"]["state"].get(state)) {
      std::string_view text;
      if (state.get(text)) return fmt::format("alert {} has a status.state that is not a string", index);
      if (text != "active") {
        ++index;
        continue;
      }
    }
    std::string_view pool, name;
    simdjson::dom::element e;
    if (!labels[poolLabel].get(e) && e.get(pool)) {
      return fmt::format("alert {} has a {} label that is not a string", index, poolLabel);
    }
    if (!labels["alertname"].get(e) && e.get(name)) {
      return fmt::format("alert {} has an alertname label that is not a string", index);
    }
    ++index;
    if (pool.empty()) continue;  // names no pool
    std::string n(name);
    if (n.empty()) {
      std::string_view fingerprint;
      n = !alert["fingerprint"].get(e) && !e.get(fingerprint) ? std::string(fingerprint) : "unnamed";
    }
    out.push_back({std::move(n), std::string(pool)});
  }
  return out;
}

}  // namespace tally::codec
