#include "tally/controller/readiness.hpp"

namespace tally::controller {

runtime::http::Readiness readiness(const state::Snapshot& snapshot, const ServingState& serving) {
  std::string missing;
  auto add = [&](const std::string& what) {
    if (!missing.empty()) missing += "; ";
    missing += what;
  };
  if (!snapshot.ready()) add(snapshot.unsyncedCaches());
  if (!serving.certificateLoaded) {
    add("the webhook serving certificate is not loaded yet (the leader creates it in its Secret)");
  } else if (!serving.serving) {
    add("the webhook server is not listening yet");
  }
  return {missing.empty(), missing};
}

}  // namespace tally::controller
