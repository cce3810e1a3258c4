#pragma once
// A rate-limited work queue with client-go's contract: an item queued many
// times is processed once; an item being processed is never handed to a
// second worker (re-adds wait until done()); failures are retried with
// per-item exponential backoff under an overall token bucket; delayed adds;
// shutdown wakes every worker, optionally after draining.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_set>
#include <vector>

#include "tally/runtime/rate_limiter.hpp"

namespace tally::runtime {

template <class Item, class Hash = std::hash<Item>>
class WorkQueue {
 public:
  explicit WorkQueue(RateLimiterConfig cfg = {}) : limiter_(cfg) {}
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void add(const Item& item) {
    std::lock_guard lock(mu_);
    addLocked(item);
  }

  void addAfter(const Item& item, std::chrono::nanoseconds delay) {
    if (delay <= std::chrono::nanoseconds(0)) return add(item);
    std::lock_guard lock(mu_);
    if (shuttingDown_) return;
    delayed_.push(Delayed{Clock::now() + delay, seq_++, item});
    cv_.notify_all();  // a waiter may need an earlier wake-up
  }

  void addRateLimited(const Item& item) { addAfter(item, limiter_.when(item)); }
  void forget(const Item& item) { limiter_.forget(item); }
  uint32_t numRequeues(const Item& item) { return limiter_.numRequeues(item); }

  // Blocks for the next item; nullopt once shut down (and drained).
  std::optional<Item> get() {
    std::unique_lock lock(mu_);
    for (;;) {
      promoteDue(Clock::now());
      if (!queue_.empty()) {
        Item item = std::move(queue_.front());
        queue_.pop_front();
        dirty_.erase(item);
        processing_.insert(item);
        return item;
      }
      if (shuttingDown_) return std::nullopt;
      if (delayed_.empty())
        cv_.wait(lock);
      else
        cv_.wait_until(lock, delayed_.top().due);
    }
  }

  // Marks the item finished; if it was added meanwhile it is queued again.
  void done(const Item& item) {
    std::lock_guard lock(mu_);
    processing_.erase(item);
    if (dirty_.count(item)) {
      queue_.push_back(item);
      cv_.notify_one();
    }
    if (processing_.empty() && queue_.empty()) drained_.notify_all();
  }

  void shutDown() {
    std::lock_guard lock(mu_);
    shuttingDown_ = true;
    cv_.notify_all();
  }

  // Stops accepting items and waits until workers emptied the queue and
  // finished what they hold.
  void shutDownWithDrain() {
    std::unique_lock lock(mu_);
    shuttingDown_ = true;
    cv_.notify_all();
    drained_.wait(lock, [&] { return processing_.empty() && queue_.empty(); });
  }

  bool shuttingDown() const {
    std::lock_guard lock(mu_);
    return shuttingDown_;
  }
  size_t len() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }
  size_t pendingDelayed() const {
    std::lock_guard lock(mu_);
    return delayed_.size();
  }

 private:
  struct Delayed {
    Clock::time_point due;
    uint64_t seq;
    Item item;
    bool operator>(const Delayed& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  void addLocked(const Item& item) {
    if (shuttingDown_ || dirty_.count(item)) return;
    dirty_.insert(item);
    if (processing_.count(item)) return;  // queued again by done()
    queue_.push_back(item);
    cv_.notify_one();
  }

  void promoteDue(Clock::time_point now) {
    while (!delayed_.empty() && delayed_.top().due <= now) {
      Item item = delayed_.top().item;
      delayed_.pop();
      addLocked(item);
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable drained_;
  std::deque<Item> queue_;
  std::unordered_set<Item, Hash> dirty_;
  std::unordered_set<Item, Hash> processing_;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed_;
  uint64_t seq_ = 0;
  bool shuttingDown_ = false;
  DefaultRateLimiter<Item, Hash> limiter_;
};

}  // namespace tally::runtime
