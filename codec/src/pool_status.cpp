#include "tally/codec/pool_status.hpp"

#include <simdjson.h>

#include <algorithm>

#include "tally/common/json.hpp"

namespace tally::codec {

bool PoolStatus::sameAs(const PoolStatus& other) const {
  PoolStatus a = *this, b = other;
  a.lastAuditTime.clear();
  b.lastAuditTime.clear();
  for (auto* s : {&a, &b}) {
    for (auto& c : s->conditions) c.lastTransitionTime.clear();
  }
  return a == b;
}

std::string statusPatch(const PoolStatus& s) {
  // Built by hand: a merge patch removes an empty string field with null.
  std::string out = "{\"status\":{";
  auto text = [&](std::string_view name, const std::string& v) {
    out += jsonString(name) + ":" + (v.empty() ? std::string("null") : jsonString(v)) + ",";
  };
  auto number = [&](std::string_view name, std::int64_t v) { out += jsonString(name) + ":" + std::to_string(v) + ","; };
  text("nodeMode", s.nodeMode);
  text("quotaUnit", s.quotaUnit);
  number("healthySchedulableDevices", s.healthySchedulableDevices);
  number("healthySchedulableUnits", s.healthySchedulableUnits);
  number("reservedDevices", s.reservedDevices);
  number("reservedUnits", s.reservedUnits);
  number("nonReservedHardQuota", s.nonReservedHardQuota);
  number("spareDevices", s.spareDevices);
  number("spareUnits", s.spareUnits);
  number("headroom", s.headroom);
  text("inFlightTransaction", s.inFlightTransaction);
  text("gateFailureId", s.gateFailureId);
  text("lastAuditTime", s.lastAuditTime);
  JsonWriter findings;
  findings.beginArray();
  for (const auto& f : s.findings) {
    findings.beginObject().field("code", f.code).field("message", f.message);
    if (!f.subject.empty()) findings.field("subject", f.subject);
    findings.endObject();
  }
  findings.endArray();
  out += "\"findings\":" + findings.str() + ",";
  JsonWriter conditions;
  writeConditions(conditions, s.conditions);
  out += "\"conditions\":" + conditions.str() + "}}";
  return out;
}

Result<PoolStatus> decodePoolStatus(std::string_view objectJson, std::string* uid) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  auto bad = [](std::string what) { return DecodeError{"", "", "GPUDeviceClass " + what}; };
  if (parser.parse(objectJson.data(), objectJson.size()).get(doc)) return bad("is not JSON");
  if (uid) {
    std::string_view v;
    uid->assign(doc["metadata"]["uid"].get(v) ? std::string_view() : v);
  }
  PoolStatus s;
  simdjson::dom::element status;
  if (doc["status"].get(status)) return s;
  simdjson::dom::object obj;
  if (status.get(obj)) return bad("status is not an object");
  auto str = [](simdjson::dom::element e, std::string& out) {
    std::string_view v;
    if (!e.get(v)) out = std::string(v);
  };
  auto num = [](simdjson::dom::element e, std::int64_t& out) {
    std::int64_t v = 0;
    if (!e.get(v)) out = v;
  };
  for (auto [key, value] : obj) {
    if (key == "nodeMode") str(value, s.nodeMode);
    if (key == "quotaUnit") str(value, s.quotaUnit);
    if (key == "reservedUnits") num(value, s.reservedUnits);
    if (key == "spareUnits") num(value, s.spareUnits);
    if (key == "healthySchedulableDevices") num(value, s.healthySchedulableDevices);
    if (key == "healthySchedulableUnits") num(value, s.healthySchedulableUnits);
    if (key == "reservedDevices") num(value, s.reservedDevices);
    if (key == "nonReservedHardQuota") num(value, s.nonReservedHardQuota);
    if (key == "spareDevices") num(value, s.spareDevices);
    if (key == "headroom") num(value, s.headroom);
    if (key == "inFlightTransaction") str(value, s.inFlightTransaction);
    if (key == "gateFailureId") str(value, s.gateFailureId);
    if (key == "lastAuditTime") str(value, s.lastAuditTime);
    if (key == "findings") {
      simdjson::dom::array items;
      if (value.get(items)) return bad("status.findings is not an array");
      for (auto item : items) {
        PoolStatus::FindingEntry f;
        simdjson::dom::element e;
        if (!item["code"].get(e)) str(e, f.code);
        if (!item["message"].get(e)) str(e, f.message);
        if (!item["subject"].get(e)) str(e, f.subject);
        s.findings.push_back(std::move(f));
      }
    }
    if (key == "conditions") {
      simdjson::dom::array items;
      if (value.get(items)) return bad("status.conditions is not an array");
      for (auto item : items) {
        Condition c;
        simdjson::dom::element e;
        if (!item["type"].get(e)) str(e, c.type);
        if (!item["status"].get(e)) str(e, c.status);
        if (!item["reason"].get(e)) str(e, c.reason);
        if (!item["message"].get(e)) str(e, c.message);
        if (!item["lastTransitionTime"].get(e)) str(e, c.lastTransitionTime);
        if (!item["observedGeneration"].get(e)) num(e, c.observedGeneration);
        s.conditions.push_back(std::move(c));
      }
      std::sort(s.conditions.begin(), s.conditions.end(),
                [](const Condition& a, const Condition& b) { return a.type < b.type; });
    }
  }
  return s;
}

}  // namespace tally::codec
