#include "tally/extender/snapshot.hpp"

namespace tally::extender {

const BoundPodRows& podsOnNode(const ExtenderSnapshot& snap) { return *snap.part<BoundPodRows>(); }

const model::Pod* boundPod(const ExtenderSnapshot& snap, std::string_view node, std::string_view uid) {
  const auto* row = podsOnNode(snap).find(node);
  if (!row) return nullptr;
  for (const auto& pod : **row) {
    if (pod->uid == uid) return pod.get();
  }
  return nullptr;
}

std::string notReadyReason(const ExtenderSnapshot& snap) {
  return "tally-extender is not ready: " + snap.unsyncedCaches() +
         "; refusing to filter rather than letting every node pass";
}

}  // namespace tally::extender
