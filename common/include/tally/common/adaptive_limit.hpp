#pragma once
// A concurrency limit that follows how fast a downstream answers (additive
// increase, multiplicative decrease). A caller takes a permit before its
// request and reports the request's latency with it: an answer within the
// target raises the limit by 1/limit (about one per round of requests), a slow
// answer or a failure cuts it by the backoff factor, at most once per round
// (only a request that started after the last cut can cut again, so a burst
// of slow answers to requests sent together counts once). Waiters beyond the
// limit queue in arrival order and give up at their own deadline.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace tally::common {

class AdaptiveLimit {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    unsigned min = 2;
    unsigned max = 64;
    unsigned initial = 16;
    // An answer slower than this cuts the limit.
    std::chrono::milliseconds target{500};
    double backoff = 0.7;
  };

  // Held while the request runs; done() (or the destructor, as a failure)
  // releases the slot.
  class Permit {
   public:
    Permit(Permit&& other) noexcept;
    Permit& operator=(Permit&&) = delete;
    Permit(const Permit&) = delete;
    ~Permit();
    // The request ended after latency; ok false when the downstream failed to
    // answer at all (an answer saying no is an answer: its latency decides).
    void done(Clock::duration latency, bool ok);
    Clock::time_point granted() const { return granted_; }

   private:
    friend class AdaptiveLimit;
    Permit(AdaptiveLimit* owner, Clock::time_point granted) : owner_(owner), granted_(granted) {}
    AdaptiveLimit* owner_;
    Clock::time_point granted_;
  };

  explicit AdaptiveLimit(Options options);
  AdaptiveLimit(const AdaptiveLimit&) = delete;
  AdaptiveLimit& operator=(const AdaptiveLimit&) = delete;

  // Waits for a slot until `until`; nullopt when it passed first.
  std::optional<Permit> acquire(Clock::time_point until);

  unsigned limit() const;
  unsigned inFlight() const;
  // Smoothed latency of the answers within the target (0 before the first).
  Clock::duration typicalLatency() const;
  std::uint64_t cuts() const;
  // Times a waiter woke and looked again (spurious wake-ups included): a freed
  // slot wakes one waiter, so this stays near the number that waited.
  std::uint64_t wakeups() const;
  // Callers queued for a slot now.
  std::size_t waiting() const;

 private:
  struct Waiter {
    std::condition_variable cv;
  };
  // Notifies the front waiter when there is room for it; under mu_.
  void wakeFront();
  void release(Clock::time_point granted, Clock::duration latency, bool ok);
  bool hasRoom() const { return inFlight_ < static_cast<unsigned>(limit_); }

  const Options options_;
  mutable std::mutex mu_;
  double limit_;
  unsigned inFlight_ = 0;
  Clock::time_point lastCut_{};
  double typicalSeconds_ = 0;
  std::uint64_t cuts_ = 0;
  std::uint64_t wakeups_ = 0;
  // The waiters in arrival order; the front one goes next.
  std::deque<Waiter*> waiting_;
};

}  // namespace tally::common
