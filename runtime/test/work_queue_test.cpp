#include "tally/runtime/work_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

namespace tally::runtime {
namespace {

using namespace std::chrono_literals;

TEST(Backoff, ItemDelayDoublesFromBaseAndSaturatesAtMax) {
  EXPECT_EQ(exponentialDelay(5ms, 1000s, 0), 5ms);
  EXPECT_EQ(exponentialDelay(5ms, 1000s, 1), 10ms);
  EXPECT_EQ(exponentialDelay(5ms, 1000s, 10), 5120ms);
  EXPECT_EQ(exponentialDelay(5ms, 1000s, 20), 1000s);
  EXPECT_EQ(exponentialDelay(5ms, 1000s, 4000), 1000s) << "no overflow for huge counts";
}

TEST(Backoff, ItemFailuresAreCountedPerItemAndForgotten) {
  ItemBackoff<std::string> b(1ms, 1s);
  EXPECT_EQ(b.when("a"), 1ms);
  EXPECT_EQ(b.when("a"), 2ms);
  EXPECT_EQ(b.when("b"), 1ms);
  EXPECT_EQ(b.failures("a"), 2u);
  b.forget("a");
  EXPECT_EQ(b.failures("a"), 0u);
  EXPECT_EQ(b.when("a"), 1ms);
}

TEST(TokenBucketLimiter, BurstIsFreeThenTokensArriveAtQps) {
  TokenBucket bucket(10, 3);
  const auto t0 = Clock::now();
  EXPECT_EQ(bucket.reserve(t0), 0ns);
  EXPECT_EQ(bucket.reserve(t0), 0ns);
  EXPECT_EQ(bucket.reserve(t0), 0ns);
  EXPECT_NEAR(std::chrono::duration<double>(bucket.reserve(t0)).count(), 0.1, 1e-6);
  EXPECT_NEAR(std::chrono::duration<double>(bucket.reserve(t0)).count(), 0.2, 1e-6);
  // One second later the debt is paid and eight tokens... capped at the burst.
  EXPECT_EQ(bucket.reserve(t0 + 1s), 0ns);
}

TEST(DefaultRateLimiterTest, TakesTheLongerOfItemBackoffAndBucket) {
  DefaultRateLimiter<std::string> rl(RateLimiterConfig{1ms, 1s, 1, 1});
  const auto t0 = Clock::now();
  EXPECT_EQ(rl.when("a", t0), 1ms);                                                 // bucket has its one token
  EXPECT_NEAR(std::chrono::duration<double>(rl.when("b", t0)).count(), 1.0, 1e-6);  // bucket empty
  EXPECT_EQ(rl.numRequeues("a"), 1u);
}

TEST(WorkQueueTest, DuplicateAddsAreProcessedOnce) {
  WorkQueue<std::string> q;
  q.add("a");
  q.add("a");
  q.add("b");
  EXPECT_EQ(q.len(), 2u);
  EXPECT_EQ(*q.get(), "a");
  EXPECT_EQ(*q.get(), "b");
}

TEST(WorkQueueTest, ItemAddedWhileProcessingIsRequeuedOnlyAfterDone) {
  WorkQueue<std::string> q;
  q.add("a");
  auto item = q.get();
  q.add("a");
  EXPECT_EQ(q.len(), 0u) << "not handed out while a worker holds it";
  q.done(*item);
  EXPECT_EQ(q.len(), 1u);
}

TEST(WorkQueueTest, DelayedAddArrivesAfterTheDelay) {
  WorkQueue<std::string> q;
  const auto t0 = Clock::now();
  q.addAfter("later", 50ms);
  q.add("now");
  EXPECT_EQ(*q.get(), "now");
  EXPECT_EQ(*q.get(), "later");
  EXPECT_GE(Clock::now() - t0, 50ms);
}

TEST(WorkQueueTest, RateLimitedRequeueBacksOffPerItem) {
  WorkQueue<std::string> q(RateLimiterConfig{20ms, 1s, 1000, 1000});
  q.add("x");
  auto t0 = Clock::now();
  auto item = q.get();
  q.addRateLimited(*item);
  q.done(*item);
  item = q.get();
  const auto first = Clock::now() - t0;
  q.addRateLimited(*item);
  q.done(*item);
  t0 = Clock::now();
  item = q.get();
  const auto second = Clock::now() - t0;
  EXPECT_GE(first, 20ms);
  EXPECT_GE(second, 40ms);
  EXPECT_EQ(q.numRequeues("x"), 2u);
  q.forget("x");
  EXPECT_EQ(q.numRequeues("x"), 0u);
}

TEST(WorkQueueTest, ShutdownWakesBlockedWorkers) {
  WorkQueue<std::string> q;
  std::thread worker([&] { EXPECT_FALSE(q.get().has_value()); });
  std::this_thread::sleep_for(20ms);
  q.shutDown();
  worker.join();
  q.add("ignored");
  EXPECT_EQ(q.len(), 0u);
}

TEST(WorkQueueConcurrency, NoItemIsProcessedByTwoWorkersAtOnce) {
  WorkQueue<int> q;
  constexpr int kWorkers = 4;
  constexpr int kItems = 20;
  std::mutex mu;
  std::set<int> active;
  std::map<int, int> processed;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (auto item = q.get()) {
        {
          std::lock_guard lock(mu);
          if (!active.insert(*item).second) overlap = true;
          ++processed[*item];
        }
        std::this_thread::sleep_for(100us);
        {
          std::lock_guard lock(mu);
          active.erase(*item);
        }
        q.done(*item);
      }
    });
  }
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < kItems; ++i) q.add(i);
  }
  q.shutDownWithDrain();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(processed.size(), static_cast<size_t>(kItems));
  for (auto& [item, n] : processed) EXPECT_GE(n, 1) << item;
}

}  // namespace
}  // namespace tally::runtime
