#pragma once
// A shared_ptr slot for one writer and many readers. The only critical
// section is the copy or swap of the pointer itself (tens of nanoseconds):
// readers never wait for the writer's work (applying events, building
// indexes, freeing an old snapshot happens after the swap, outside it).
// A two-state spin flag with acquire/release ordering keeps it visible to
// ThreadSanitizer, which libstdc++ 12's std::atomic<std::shared_ptr> is not.

#include <atomic>
#include <memory>
#include <thread>

namespace tally::runtime {

template <class T>
class PublishedPtr {
 public:
  explicit PublishedPtr(std::shared_ptr<const T> initial) : ptr_(std::move(initial)) {}

  std::shared_ptr<const T> load() const {
    lock();
    std::shared_ptr<const T> copy = ptr_;
    unlock();
    return copy;
  }

  void store(std::shared_ptr<const T> next) {
    lock();
    ptr_.swap(next);
    unlock();
    // `next` now holds the previous value; it is released here, unlocked.
  }

 private:
  void lock() const {
    while (busy_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; busy_.load(std::memory_order_relaxed); ++spins) {
        if (spins > 64) std::this_thread::yield();
      }
    }
  }
  void unlock() const { busy_.store(false, std::memory_order_release); }

  mutable std::atomic<bool> busy_{false};
  std::shared_ptr<const T> ptr_;
};

}  // namespace tally::runtime
