#pragma once
// A plan's verdict: the affected pools before and after the change, every term
// with its sources, and the refusals.

#include <string>

#include "tally/model/pool.hpp"

namespace tally::cli {

std::string planJson(const model::PlanResult& plan);
std::string planText(const model::PlanResult& plan);

}  // namespace tally::cli
