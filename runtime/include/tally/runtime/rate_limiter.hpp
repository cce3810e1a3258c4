#pragma once
// Rate limiters for the work queue, with client-go's semantics and defaults:
// per-item exponential failure backoff (5 ms doubling to 1000 s) combined with
// an overall token bucket (10 qps, burst 100) by taking the longer delay.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tally::runtime {

using Clock = std::chrono::steady_clock;

// delay = base * 2^(failures so far), capped at max.
std::chrono::nanoseconds exponentialDelay(std::chrono::nanoseconds base, std::chrono::nanoseconds max,
                                          uint32_t failures);

class TokenBucket {
 public:
  TokenBucket(double qps, int burst) : qps_(qps), burst_(burst), tokens_(burst) {}
  // Reserves one token; returns how long the caller must wait for it.
  std::chrono::nanoseconds reserve(Clock::time_point now);

 private:
  std::mutex mu_;
  double qps_;
  double burst_;
  double tokens_;
  Clock::time_point last_{};
  bool started_ = false;
};

template <class Item, class Hash = std::hash<Item>>
class ItemBackoff {
 public:
  ItemBackoff(std::chrono::nanoseconds base, std::chrono::nanoseconds max) : base_(base), max_(max) {}
  std::chrono::nanoseconds when(const Item& item) {
    std::lock_guard lock(mu_);
    uint32_t& n = failures_[item];
    return exponentialDelay(base_, max_, n++);
  }
  void forget(const Item& item) {
    std::lock_guard lock(mu_);
    failures_.erase(item);
  }
  uint32_t failures(const Item& item) {
    std::lock_guard lock(mu_);
    auto it = failures_.find(item);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  std::mutex mu_;
  std::chrono::nanoseconds base_;
  std::chrono::nanoseconds max_;
  std::unordered_map<Item, uint32_t, Hash> failures_;
};

struct RateLimiterConfig {
  std::chrono::nanoseconds itemBase = std::chrono::milliseconds(5);
  std::chrono::nanoseconds itemMax = std::chrono::seconds(1000);
  double qps = 10;
  int burst = 100;
};

// The default controller rate limiter: max(per-item backoff, token bucket).
template <class Item, class Hash = std::hash<Item>>
class DefaultRateLimiter {
 public:
  explicit DefaultRateLimiter(RateLimiterConfig cfg = {})
      : items_(cfg.itemBase, cfg.itemMax), bucket_(cfg.qps, cfg.burst) {}
  std::chrono::nanoseconds when(const Item& item, Clock::time_point now = Clock::now()) {
    return std::max(items_.when(item), bucket_.reserve(now));
  }
  void forget(const Item& item) { items_.forget(item); }
  uint32_t numRequeues(const Item& item) { return items_.failures(item); }

 private:
  ItemBackoff<Item, Hash> items_;
  TokenBucket bucket_;
};

}  // namespace tally::runtime
