#include <iostream>

#include "commands.hpp"
#include "table.hpp"
#include "tally/common/json.hpp"
#include "tally/model/report.hpp"

namespace tally::cli {
namespace {

bool fails(const model::PoolReport& pool) {
  for (const auto& f : pool.findings) {
    if (model::failsClosed(f.code)) return true;
  }
  return false;
}

std::string auditText(const model::Report& report) {
  std::vector<std::vector<std::string>> rows = {{"POOL", "AUDIT", "FINDINGS", "GATE"}};
  for (const auto& pool : report.pools) {
    rows.push_back({pool.pool, fails(pool) ? "FAILS" : "passes", std::to_string(pool.findings.size()),
                    pool.gate.open ? "open" : "closed"});
  }
  std::string out = renderTable(rows);
  for (const auto& pool : report.pools) {
    if (pool.findings.empty() && pool.gate.open) continue;
    out += "\npool " + pool.pool + ":\n";
    for (const auto& f : pool.findings) {
      out += "  " + std::string(model::toString(f.code)) +
             (!model::failsClosed(f.code) ? " (informational)"
              : f.converging              ? " (converging)"
                                          : "") +
             ": " + f.message + "\n";
      out += "    to clear: " + std::string(model::remedy(f.code)) + "\n";
    }
    if (!pool.gate.open && !pool.gate.reason.empty()) out += "  gate closed: " + pool.gate.reason + "\n";
  }
  return out;
}

std::string auditJson(const model::Report& report) {
  JsonWriter json;
  json.beginObject().key("pools").beginArray();
  for (const auto& pool : report.pools) {
    json.beginObject().field("pool", std::string_view(pool.pool)).field("fails", fails(pool));
    json.key("findings").beginArray();
    for (const auto& f : pool.findings) {
      json.beginObject()
          .field("code", model::toString(f.code))
          .field("failsClosed", model::failsClosed(f.code))
          .field("converging", f.converging)
          .field("subject", std::string_view(f.subject))
          .field("message", std::string_view(f.message))
          .field("remedy", model::remedy(f.code))
          .endObject();
    }
    json.endArray();
    json.key("gate").beginObject().field("open", pool.gate.open);
    if (!pool.gate.reason.empty()) json.field("reason", std::string_view(pool.gate.reason));
    json.endObject().endObject();
  }
  json.endArray().endObject();
  return json.str() + "\n";
}

}  // namespace

int runAudit(const AuditCommandOptions& options) {
  auto snapshot = loadInputs(options.input);
  if (!snapshot) {
    std::cerr << "tallyctl audit: " << snapshot.error().describe() << '\n';
    return kExitBadInput;
  }
  printSkipped(*snapshot);
  const model::Report report = model::buildReport(snapshot->cluster);
  std::cout << (options.output == "json" ? auditJson(report) : auditText(report));
  for (const auto& pool : report.pools) {
    if (fails(pool)) return kExitCheckFailed;
  }
  return kExitOk;
}

}  // namespace tally::cli
