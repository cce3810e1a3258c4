// The claim door under concurrent CREATEs (run under TSan by the sanitizer
// tree): reviews racing on one snapshot never admit more units than the
// budget holds, whichever thread gets there first.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "claim_review.hpp"

namespace tally::controller {
namespace {

using namespace testing;

TEST(ClaimDoorConcurrency, RacingCreatesNeverSpendMoreThanTheBudget) {
  for (int round = 0; round < 20; ++round) {
    ClaimWebhook door;
    auto writer = draPool(3, &door);
    door.readFrom(writer->snapshots());
    auto handler = door.handler();
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        const std::string name = "c-" + std::to_string(t);
        auto request = runtime::admission::decodeAdmissionReview(
            claimReview("acme", name, claimJson("acme", name, "h200.example.com", 1)));
        ASSERT_TRUE(request);
        if (handler.decide(*request).allowed()) ++admitted;
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(admitted.load(), 3) << "round " << round;
    EXPECT_EQ(door.inFlight(), 3u);
  }
}

}  // namespace
}  // namespace tally::controller
