#include "tally/common/adaptive_limit.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

using tally::common::AdaptiveLimit;
using namespace std::chrono_literals;

namespace {

AdaptiveLimit::Clock::time_point in(std::chrono::milliseconds d) { return AdaptiveLimit::Clock::now() + d; }

TEST(AdaptiveLimit, FastAnswersRaiseTheLimitUpToItsMaximum) {
  AdaptiveLimit limit({.min = 2, .max = 8, .initial = 4, .target = 100ms});
  EXPECT_EQ(limit.limit(), 4u);
  // About one step per round of `limit` answers.
  for (int i = 0; i < 5; ++i) limit.acquire(in(10ms))->done(5ms, true);
  EXPECT_EQ(limit.limit(), 5u);
  for (int i = 0; i < 200; ++i) limit.acquire(in(10ms))->done(5ms, true);
  EXPECT_EQ(limit.limit(), 8u);
  EXPECT_EQ(limit.cuts(), 0u);
  EXPECT_GT(limit.typicalLatency(), 4ms);
  EXPECT_LT(limit.typicalLatency(), 6ms);
}

TEST(AdaptiveLimit, SlowAnswersToRequestsSentTogetherCutOnce) {
  AdaptiveLimit limit({.min = 2, .max = 64, .initial = 20, .target = 100ms, .backoff = 0.5});
  std::vector<AdaptiveLimit::Permit> sent;
  for (int i = 0; i < 10; ++i) sent.push_back(*limit.acquire(in(10ms)));
  for (auto& p : sent) p.done(300ms, true);
  EXPECT_EQ(limit.cuts(), 1u);
  EXPECT_EQ(limit.limit(), 10u);
  // A request sent after the cut and slow again cuts again.
  limit.acquire(in(10ms))->done(300ms, true);
  EXPECT_EQ(limit.cuts(), 2u);
  EXPECT_EQ(limit.limit(), 5u);
}

TEST(AdaptiveLimit, FailuresCutAndTheLimitStaysAtItsMinimum) {
  AdaptiveLimit limit({.min = 3, .max = 64, .initial = 10, .target = 100ms});
  for (int i = 0; i < 20; ++i) limit.acquire(in(10ms))->done(1ms, false);
  EXPECT_EQ(limit.limit(), 3u);
  EXPECT_EQ(limit.inFlight(), 0u);
}

TEST(AdaptiveLimit, APermitDroppedWithoutAnAnswerReturnsItsSlotAsAFailure) {
  AdaptiveLimit limit({.min = 1, .max = 4, .initial = 2, .target = 100ms});
  { auto p = limit.acquire(in(10ms)); }
  EXPECT_EQ(limit.inFlight(), 0u);
  EXPECT_EQ(limit.cuts(), 1u);
  EXPECT_EQ(limit.limit(), 1u);
}

TEST(AdaptiveLimit, AWaiterPastItsDeadlineGetsNoPermitAndTakesNoSlot) {
  AdaptiveLimit limit({.min = 1, .max = 1, .initial = 1, .target = 100ms});
  auto held = limit.acquire(in(10ms));
  ASSERT_TRUE(held);
  const auto before = AdaptiveLimit::Clock::now();
  EXPECT_FALSE(limit.acquire(in(30ms)));
  EXPECT_GE(AdaptiveLimit::Clock::now() - before, 30ms);
  EXPECT_EQ(limit.inFlight(), 1u);
  held->done(1ms, true);
  EXPECT_TRUE(limit.acquire(in(10ms)));
}

TEST(AdaptiveLimit, ConcurrentCallersNeverExceedTheLimitAndAllFinish) {
  AdaptiveLimit limit({.min = 2, .max = 6, .initial = 3, .target = 50ms});
  std::atomic<int> running{0}, most{0}, served{0}, expired{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        auto p = limit.acquire(in(2000ms));
        if (!p) {
          ++expired;
          continue;
        }
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(100us);
        --running;
        // Every fifth caller's answer is slow: the limit moves both ways.
        p->done((t + i) % 5 == 0 ? 80ms : 1ms, true);
        ++served;
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(served.load() + expired.load(), 16 * 40);
  EXPECT_EQ(expired.load(), 0);
  EXPECT_LE(most.load(), 6);
  EXPECT_GT(limit.cuts(), 0u);
  EXPECT_EQ(limit.inFlight(), 0u);
  EXPECT_GE(limit.limit(), 2u);
}

TEST(AdaptiveLimit, AFreedSlotWakesOneWaiterNotTheWholeLine) {
  // One slot, 16 callers queued behind it: each release hands the slot to the
  // next in line. Waking the whole line at every release would be 120 wake-ups
  // (15 + 14 + ... + 1) of which 105 find they are not first.
  AdaptiveLimit limit({.min = 1, .max = 1, .initial = 1, .target = 1s});
  auto held = limit.acquire(in(1s));
  ASSERT_TRUE(held);
  std::mutex orderMu;
  std::vector<int> order;
  std::vector<std::thread> callers;
  for (int t = 0; t < 16; ++t) {
    callers.emplace_back([&, t] {
      auto p = limit.acquire(in(10s));
      ASSERT_TRUE(p);
      {
        std::lock_guard lock(orderMu);
        order.push_back(t);
      }
      std::this_thread::sleep_for(200us);
      p->done(1ms, true);
    });
    // Queued in turn, so the order they are served in can be checked: the
    // next caller starts only once this one is in the line.
    const auto until = in(10s);
    while (limit.waiting() < static_cast<std::size_t>(t + 1) && AdaptiveLimit::Clock::now() < until) {
      std::this_thread::sleep_for(100us);
    }
    EXPECT_EQ(limit.waiting(), static_cast<std::size_t>(t + 1));
  }
  held->done(1ms, true);
  for (auto& c : callers) c.join();
  ASSERT_EQ(order.size(), 16u);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(order[static_cast<std::size_t>(t)], t);
  EXPECT_LE(limit.wakeups(), 24u);
  EXPECT_GE(limit.wakeups(), 16u);
  EXPECT_EQ(limit.inFlight(), 0u);
}

}  // namespace
