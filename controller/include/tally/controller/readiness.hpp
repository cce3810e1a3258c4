#pragma once
// /readyz of tally-controller: ready once this replica's caches synced (it
// answers orders from them) and its webhook server serves a certificate; the
// 503's body says which is missing.

#include "tally/runtime/http/operation_routes.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::controller {

struct ServingState {
  bool certificateLoaded = false;  // the serving certificate and its key are on disk and match
  bool serving = false;            // the HTTPS webhook server is listening with them
};

runtime::http::Readiness readiness(const state::Snapshot& snapshot, const ServingState& serving);

}  // namespace tally::controller
