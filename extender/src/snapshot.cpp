#include "tally/extender/snapshot.hpp"

namespace tally::extender {

const model::Pod* ExtenderSnapshot::boundPod(std::string_view node, std::string_view uid) const {
  const auto* row = podsOnNode.find(node);
  if (!row) return nullptr;
  for (const model::Pod& pod : **row) {
    if (pod.uid == uid) return &pod;
  }
  return nullptr;
}

std::string ExtenderSnapshot::notReadyReason() const {
  std::string kinds;
  for (std::size_t i = 0; i < unsynced.size(); ++i) {
    if (i) kinds += ", ";
    kinds += model::toString(unsynced[i]);
  }
  return "tally-extender is not ready: the " + kinds + (unsynced.size() == 1 ? " cache is" : " caches are") +
         " not synced yet; refusing to filter rather than letting every node pass";
}

}  // namespace tally::extender
