#pragma once
// Exponential backoff with jitter for reconnects and retries.

#include <algorithm>
#include <chrono>
#include <random>

namespace tally::runtime {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter = 1.0)
      : initial_(initial), max_(max), jitter_(jitter), current_(initial) {}

  // The next wait: current * (1 + jitter * U[0,1)), capped; then doubles.
  std::chrono::milliseconds next() {
    std::uniform_real_distribution<double> dist(0.0, jitter_);
    const double factor = 1.0 + dist(rng_);
    auto wait = std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(current_.count()) * factor));
    current_ = std::min(current_ * 2, max_);
    return std::min(wait, max_);
  }
  void reset() { current_ = initial_; }
  std::chrono::milliseconds current() const { return current_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  double jitter_;
  std::chrono::milliseconds current_;
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace tally::runtime
