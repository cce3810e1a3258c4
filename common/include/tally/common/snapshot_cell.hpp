#pragma once
// The tree's one publication mechanism: one immutable value published by one
// writer and read by many threads with epoch-based reclamation. A reader
// announces the epoch it starts in, loads the pointer and reads; it never
// takes a lock, never touches a reference count and never waits for the
// writer (wait-free). The writer retires replaced values and frees them, on
// its own thread, once no reader announced an epoch old enough to still see
// them; so values may hold CowMaps (cow_map.hpp), whose copies must all be
// released by one thread. The cluster state's snapshots and the informers'
// stores publish through it.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace tally {

namespace detail {
// A small id per live thread, reused after the thread exits, so each cell can
// keep one announcement slot per reader thread.
inline constexpr std::size_t kMaxReaderThreads = 1024;
std::size_t readerSlot();
}  // namespace detail

template <class T>
class SnapshotCell {
  struct Slot;

 public:
  SnapshotCell() = default;
  ~SnapshotCell() {
    delete current_.load();
    for (auto& [p, e] : retired_) delete p;
  }
  SnapshotCell(const SnapshotCell&) = delete;
  SnapshotCell& operator=(const SnapshotCell&) = delete;

  // A read in progress; the value stays valid until the guard is destroyed.
  // A thread may hold several guards of one cell at once (the first one's
  // announcement covers the later ones); each is destroyed on the thread
  // that took it.
  class Guard {
   public:
    Guard(Guard&& other) noexcept : slot_(std::exchange(other.slot_, nullptr)), value_(other.value_) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() {
      if (slot_ && --slot_->depth == 0) slot_->epoch.store(0, std::memory_order_release);
    }
    const T* get() const { return value_; }
    const T* operator->() const { return value_; }
    const T& operator*() const { return *value_; }
    explicit operator bool() const { return value_ != nullptr; }

   private:
    friend class SnapshotCell;
    Guard(typename SnapshotCell::Slot* slot, const T* value) : slot_(slot), value_(value) {}
    typename SnapshotCell::Slot* slot_;
    const T* value_;
  };

  Guard read() const {
    Slot& slot = slots_[detail::readerSlot()];
    // An outer guard on this thread announced an epoch no later than now: it
    // protects whatever this read loads too.
    if (slot.depth++ == 0) slot.epoch.store(epoch_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
    return Guard(&slot, current_.load(std::memory_order_seq_cst));
  }

  // Writer side (one thread at a time).
  void publish(std::unique_ptr<const T> next) {
    const T* old = current_.exchange(next.release(), std::memory_order_seq_cst);
    std::uint64_t retiredAt = epoch_.fetch_add(1, std::memory_order_seq_cst);
    std::lock_guard lock(writerMu_);
    if (old) retired_.emplace_back(old, retiredAt);
    reclaimLocked();
  }

  // Frees retired values no reader can still hold; publish() calls it too.
  void reclaim() {
    std::lock_guard lock(writerMu_);
    reclaimLocked();
  }

  std::size_t retiredCount() const {
    std::lock_guard lock(writerMu_);
    return retired_.size();
  }

 private:
  void reclaimLocked() {
    if (retired_.empty()) return;
    // A reader that announced epoch e may hold anything retired at epoch >= e.
    std::uint64_t oldestActive = UINT64_MAX;
    for (const auto& s : slots_) {
      std::uint64_t e = s.epoch.load(std::memory_order_seq_cst);
      if (e != 0 && e < oldestActive) oldestActive = e;
    }
    std::vector<std::pair<const T*, std::uint64_t>> keep;
    for (auto& [p, e] : retired_) {
      if (e < oldestActive)
        delete p;
      else
        keep.emplace_back(p, e);
    }
    retired_ = std::move(keep);
  }

  struct alignas(64) Slot {
    std::atomic<std::uint64_t> epoch{0};  // 0: not reading
    std::uint32_t depth = 0;              // guards the slot's thread holds; only that thread touches it
  };
  mutable std::array<Slot, detail::kMaxReaderThreads> slots_{};
  std::atomic<std::uint64_t> epoch_{1};
  std::atomic<const T*> current_{nullptr};
  mutable std::mutex writerMu_;  // writer-side bookkeeping only; readers never take it
  std::vector<std::pair<const T*, std::uint64_t>> retired_;
};

}  // namespace tally
