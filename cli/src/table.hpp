#pragma once
// tallyctl's tables: left-aligned columns wide enough for every cell.

#include <string>
#include <vector>

namespace tally::cli {

std::string renderTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace tally::cli
