#pragma once
// The capacity report as JSON (for machines and tests) or as a table (for people).

#include <string>

#include "tally/model/report.hpp"

namespace tally::cli {

std::string reportJson(const model::Report& report);
std::string reportTable(const model::Report& report);

}  // namespace tally::cli
