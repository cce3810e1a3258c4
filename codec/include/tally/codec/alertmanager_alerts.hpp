#pragma once
// Alertmanager's answer to GET /api/v2/alerts (the controller's AlertSource,
// --alertmanager-url): the firing alerts that name a GPU pool. The bytes are
// whatever answers at that URL.

#include <string>
#include <string_view>
#include <vector>

#include "tally/common/expected.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec {

// The alerts of a v2 /api/v2/alerts answer (a JSON array): those whose
// status.state is "active" (or that carry no status) and whose labels hold
// `poolLabel`, named by their alertname label (else their fingerprint). An
// error says what is wrong.
Expected<std::vector<model::ActiveAlert>, std::string> parseAlerts(std::string_view json, std::string_view poolLabel);

}  // namespace tally::codec
