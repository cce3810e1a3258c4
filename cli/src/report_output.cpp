#include "report_output.hpp"

#include "table.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

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

void writePool(JsonWriter& json, const model::PoolReport& pool) {
  const model::PoolInvariant& inv = pool.invariant;
  const model::PoolFigures figures = model::poolFigures(inv);  // as the GPUDeviceClass status shows them
  json.beginObject()
      .field("pool", std::string_view(pool.pool))
      .field("quotaUnit", std::string_view(inv.quotaUnit))
      .field("healthySchedulableDevices", figures.healthySchedulableDevices)
      .field("healthySchedulableUnits", figures.healthySchedulableUnits)
      .field("reservedDevices", figures.reservedDevices)
      .field("reservedUnits", figures.reservedUnits)
      .field("nonReservedHardQuota", figures.nonReservedHardQuota)
      .field("spareDevices", figures.spareDevices)
      .field("spareUnits", figures.spareUnits)
      .field("headroom", figures.headroom)
      .field("invariantHolds", inv.holds());
  json.key("findings").beginArray();
  for (const auto& finding : pool.findings) {
    json.beginObject()
        .field("code", model::toString(finding.code))
        .field("message", std::string_view(finding.message))
        .endObject();
  }
  json.endArray();
  json.key("gate").beginObject().field("open", pool.gate.open);
  if (!pool.gate.failureId.empty()) json.field("failureId", std::string_view(pool.gate.failureId));
  if (!pool.gate.reason.empty()) json.field("reason", std::string_view(pool.gate.reason));
  json.endObject();
  json.field("equation", inv.equation())
      .field("quotaKey", std::string_view(inv.quotaKey))
      .field("unitsPerDevice", inv.unitsPerDevice);
  json.key("terms").beginObject();
  writeTerm(json, "healthy", inv.healthy);
  writeTerm(json, "reserved", inv.reserved);
  writeTerm(json, "nonReservedHard", inv.nonReservedHard);
  writeTerm(json, "spare", inv.spare);
  json.endObject();
  json.endObject();
}

void writeNode(JsonWriter& json, const model::NodeReport& node) {
  json.beginObject()
      .field("name", std::string_view(node.name))
      .field("pool", std::string_view(node.pool))
      .field("unitsServed", node.unitsServed)
      .field("unitsUsed", node.unitsUsed)
      .field("unitsHeld", node.unitsHeld)
      .field("unitsFree", node.unitsFree);
  if (!node.reason.empty()) json.field("reason", std::string_view(node.reason));
  json.endObject();
}

}  // namespace

std::string renderTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
  return out.str();
}

std::string reportJson(const model::Report& report) {
  JsonWriter json;
  json.beginObject().key("pools").beginArray();
  for (const auto& pool : report.pools) writePool(json, pool);
  json.endArray().key("nodes").beginArray();
  for (const auto& node : report.nodes) writeNode(json, node);
  json.endArray().endObject();
  return json.str() + "\n";
}

std::string reportTable(const model::Report& report) {
  std::vector<std::vector<std::string>> pools = {
      {"POOL", "HEALTHY", "UNITS", "RESERVED", "HARD-QUOTA", "SPARE", "HEADROOM", "INVARIANT", "GATE"}};
  for (const auto& pool : report.pools) {
    const model::PoolInvariant& inv = pool.invariant;
    const model::PoolFigures f = model::poolFigures(inv);
    pools.push_back({pool.pool, std::to_string(f.healthySchedulableDevices), std::to_string(f.healthySchedulableUnits),
                     std::to_string(f.reservedDevices), std::to_string(f.nonReservedHardQuota),
                     std::to_string(f.spareDevices), std::to_string(f.headroom), inv.holds() ? "holds" : "BROKEN",
                     pool.gate.open ? "open" : "closed"});
  }
  std::ostringstream out;
  out << renderTable(pools);
  for (const auto& pool : report.pools) {
    out << '\n' << pool.invariant.equation() << '\n';
    for (const auto& finding : pool.findings) {
      out << "  " << model::toString(finding.code) << ": " << finding.message << '\n';
    }
    if (!pool.gate.open && !pool.gate.reason.empty()) out << "  gate closed: " << pool.gate.reason << '\n';
  }
  std::vector<std::vector<std::string>> nodes = {{"NODE", "POOL", "SERVED", "USED", "HELD", "FREE", "NOTE"}};
  for (const auto& node : report.nodes) {
    nodes.push_back({node.name, node.pool.empty() ? "-" : node.pool, std::to_string(node.unitsServed),
                     std::to_string(node.unitsUsed), std::to_string(node.unitsHeld), std::to_string(node.unitsFree),
                     node.reason});
  }
  out << '\n' << renderTable(nodes);
  return out.str();
}

}  // namespace tally::cli
