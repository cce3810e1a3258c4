#include "tally/state/snapshot.hpp"

namespace tally::state {

std::string Snapshot::unsyncedCaches() const {
  std::string kinds;
  for (std::size_t i = 0; i < unsynced.size(); ++i) {
    if (i) kinds += ", ";
    kinds += model::toString(unsynced[i]);
  }
  return "the " + kinds + (unsynced.size() == 1 ? " cache is" : " caches are") + " not synced yet";
}

}  // namespace tally::state
