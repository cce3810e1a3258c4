#include "tally/runtime/rate_limiter.hpp"

#include <algorithm>
#include <cmath>

namespace tally::runtime {

std::chrono::nanoseconds exponentialDelay(std::chrono::nanoseconds base, std::chrono::nanoseconds max,
                                          uint32_t failures) {
  // Computed in floating point so large failure counts saturate instead of overflowing.
  const double d = static_cast<double>(base.count()) * std::pow(2.0, static_cast<double>(failures));
  if (d >= static_cast<double>(max.count())) return max;
  return std::chrono::nanoseconds(static_cast<int64_t>(d));
}

std::chrono::nanoseconds TokenBucket::reserve(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!started_) {
    started_ = true;
    last_ = now;
  }
  if (now > last_) {
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1.0;  // may go negative: the debt is the wait
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / qps_ * 1e9));
}

}  // namespace tally::runtime
