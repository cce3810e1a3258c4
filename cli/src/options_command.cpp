#include <iostream>

#include "commands.hpp"
#include "table.hpp"
#include "tally/codec/catalog_json.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/catalog.hpp"

namespace tally::cli {
namespace {

std::string reasons(const model::ClassOption& o) {
  std::string out;
  for (const auto& r : o.refusals) {
    if (!out.empty()) out += "; ";
    out += "[" + std::string(model::toString(r.code)) + "] " + r.message;
  }
  return out;
}

std::string optionsTable(const model::CatalogOptions& options) {
  std::vector<std::vector<std::string>> rows = {
      {"CLASS", "WORKLOAD", "ALLOCATION", "ORDERABLE", "LARGEST", "MAX", "WHY NOT (MORE)"}};
  for (const auto& o : options.classes) {
    rows.push_back({o.className, std::string(model::toString(o.workload)), std::string(model::toString(o.allocation)),
                    o.orderable ? "yes" : "no", std::to_string(o.largestCount), std::to_string(o.maxCount),
                    reasons(o)});
  }
  return "namespace " + options.ns + "\n" + renderTable(rows);
}

}  // namespace

int runOptions(const OptionsOptions& options) {
  auto snapshot = loadInputs(options.input);
  if (!snapshot) {
    std::cerr << "tallyctl options: " << snapshot.error().describe() << '\n';
    return kExitBadInput;
  }
  printSkipped(*snapshot);
  const model::Cluster& cluster = snapshot->cluster;
  const model::TotalsCapacityView view(cluster, model::computeUsage(cluster));
  const model::CatalogOptions catalog = model::catalogOptions(cluster, view, options.ns);
  std::cout << (options.output == "json" ? codec::encodeCatalog(catalog) + "\n" : optionsTable(catalog));
  return kExitOk;
}

}  // namespace tally::cli
