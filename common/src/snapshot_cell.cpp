#include "tally/common/snapshot_cell.hpp"

#include <cstdio>
#include <exception>

namespace tally::detail {
namespace {

std::mutex gSlotsMu;
std::vector<std::size_t> gFreeSlots;
std::size_t gNextSlot = 0;

struct ThreadSlot {
  std::size_t id;
  ThreadSlot() {
    std::lock_guard lock(gSlotsMu);
    if (!gFreeSlots.empty()) {
      id = gFreeSlots.back();
      gFreeSlots.pop_back();
    } else if (gNextSlot < kMaxReaderThreads) {
      id = gNextSlot++;
    } else {
      std::fputs("tally: more than 1024 threads read snapshots at once\n", stderr);
      std::terminate();
    }
  }
  ~ThreadSlot() {
    std::lock_guard lock(gSlotsMu);
    gFreeSlots.push_back(id);
  }
};

}  // namespace

std::size_t readerSlot() {
  thread_local ThreadSlot slot;
  return slot.id;
}

}  // namespace tally::detail
