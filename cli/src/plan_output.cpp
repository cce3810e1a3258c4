#include "plan_output.hpp"

#include <sstream>

#include "tally/common/json.hpp"

namespace tally::cli {
namespace {

void writeTerm(JsonWriter& json, std::string_view name, const model::Term& term) {
  json.key(name).beginObject().field("units", term.units);
  json.key("sources").beginArray();
  for (const auto& source : term.sources) {
    json.beginObject().field("object", std::string_view(source.object)).field("quantity", source.quantity);
    if (!source.note.empty()) json.field("note", std::string_view(source.note));
    json.endObject();
  }
  json.endArray().endObject();
}

void writeInvariant(JsonWriter& json, const model::PoolInvariant& inv) {
  json.beginObject()
      .field("pool", std::string_view(inv.pool))
      .field("quotaKey", std::string_view(inv.quotaKey))
      .field("unitsPerDevice", inv.unitsPerDevice)
      .field("healthySchedulableDevices", inv.healthySchedulableDevices)
      .field("headroom", inv.headroom)
      .field("invariantHolds", inv.holds())
      .field("equation", inv.equation());
  json.key("terms").beginObject();
  writeTerm(json, "healthy", inv.healthy);
  writeTerm(json, "reserved", inv.reserved);
  writeTerm(json, "nonReservedHard", inv.nonReservedHard);
  writeTerm(json, "spare", inv.spare);
  json.endObject().endObject();
}

void writeSources(std::ostringstream& out, std::string_view name, const model::Term& term) {
  out << "    " << name << " " << term.units << ":";
  if (term.sources.empty()) out << " (none)";
  for (const auto& source : term.sources) {
    out << ' ' << source.object << '=' << source.quantity;
    if (!source.note.empty()) out << " (" << source.note << ')';
  }
  out << '\n';
}

}  // namespace

std::string planJson(const model::PlanResult& plan) {
  JsonWriter json;
  json.beginObject().field("allowed", plan.decision.allowed());
  json.key("refusals").beginArray();
  for (const auto& refusal : plan.decision.refusals) {
    json.beginObject()
        .field("code", model::toString(refusal.code))
        .field("message", std::string_view(refusal.message))
        .endObject();
  }
  json.endArray().key("before").beginArray();
  for (const auto& inv : plan.before) writeInvariant(json, inv);
  json.endArray().key("after").beginArray();
  for (const auto& inv : plan.after) writeInvariant(json, inv);
  json.endArray().endObject();
  return json.str() + "\n";
}

std::string planText(const model::PlanResult& plan) {
  std::ostringstream out;
  for (std::size_t i = 0; i < plan.after.size(); ++i) {
    if (i < plan.before.size()) out << "before  " << plan.before[i].equation() << '\n';
    out << "after   " << plan.after[i].equation() << '\n';
    writeSources(out, "healthy", plan.after[i].healthy);
    writeSources(out, "reserved", plan.after[i].reserved);
    writeSources(out, "non-reserved hard quota", plan.after[i].nonReservedHard);
    writeSources(out, "spare", plan.after[i].spare);
  }
  if (plan.decision.allowed()) {
    out << "allowed: every affected pool keeps its invariant\n";
  } else {
    for (const auto& refusal : plan.decision.refusals) {
      out << "refused: " << model::toString(refusal.code) << ": " << refusal.message << '\n';
    }
  }
  return out.str();
}

}  // namespace tally::cli
