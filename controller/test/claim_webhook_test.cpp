// The claim door on a hand-built snapshot: reviews of ResourceClaim CREATEs
// decoded from their AdmissionReview text, each answer the model's.

#include "tally/controller/claim_webhook.hpp"

#include <gtest/gtest.h>

#include "claim_review.hpp"

namespace tally::controller {
namespace {

using namespace testing;
using runtime::admission::AdmissionResponse;

constexpr const char* kDeviceClass = "h200.example.com";

struct ClaimDoor : ::testing::Test {
  std::unique_ptr<ClaimWebhook> door = std::make_unique<ClaimWebhook>();
  std::unique_ptr<state::Writer> writer = draPool(3, door.get());
  void SetUp() override { door->readFrom(writer->snapshots()); }
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();

  AdmissionResponse answer(const std::string& review) {
    auto request = runtime::admission::decodeAdmissionReview(review);
    EXPECT_TRUE(request) << (request ? "" : request.error().message);
    if (!request) return AdmissionResponse::refuse(400, "bad test review");
    return door->review(*request, now).response;
  }
  AdmissionResponse create(const std::string& name, int count, bool dryRun = false) {
    return answer(claimReview("acme", name, claimJson("acme", name, kDeviceClass, count), dryRun));
  }
};

TEST_F(ClaimDoor, WithinBudgetIsAdmittedAndOverItRefusedNamingTheQuota) {
  EXPECT_TRUE(create("a", 2).allowed);
  AdmissionResponse over = create("b", 2);
  ASSERT_FALSE(over.allowed);
  EXPECT_EQ(over.code, 403);
  EXPECT_NE(over.message.find("tally: [BudgetExceeded]"), std::string::npos) << over.message;
  EXPECT_NE(over.message.find("acme-org/plan-quota"), std::string::npos) << over.message;
}

TEST_F(ClaimDoor, AnAdmittedClaimCountsUntilTheWatchDeliversIt) {
  ASSERT_TRUE(create("a", 2).allowed);
  EXPECT_EQ(door->inFlight(), 1u);
  EXPECT_FALSE(create("b", 2).allowed) << "2 in flight + 2 > 3";
  // The watch delivers it (allocated): the snapshot counts it, the flight ends.
  writer->upsert(state::Object(model::testing::allocated(model::testing::draClaim("acme", "a", kDeviceClass, 2),
                                                         "dra-1", "dra-1", {"gpu-0", "gpu-1"})));
  writer->flush();
  EXPECT_TRUE(create("c", 1).allowed);
  EXPECT_EQ(door->inFlight(), 1u) << "a left the flights, c joined";
  EXPECT_FALSE(create("d", 1).allowed) << "2 allocated + 1 in flight = 3";
  // Past the flight time an undelivered admission no longer counts.
  now += ClaimWebhook::kFlightSeconds + std::chrono::seconds(1);
  EXPECT_TRUE(create("d", 1).allowed);
}

TEST_F(ClaimDoor, AClaimDeliveredAndDeletedAtOnceNoLongerCounts) {
  ASSERT_TRUE(create("a", 3).allowed);
  EXPECT_FALSE(create("b", 1).allowed);
  // The watch delivers it, a snapshot holding it is published, it is deleted
  // before the door decides again: neither the flight nor the snapshot holds it.
  writer->upsert(state::Object(model::testing::draClaim("acme", "a", kDeviceClass, 3)));
  writer->flush();
  EXPECT_EQ(door->inFlight(), 0u);
  writer->remove(model::Kind::ResourceClaim, "acme", "a");
  writer->flush();
  EXPECT_TRUE(create("b", 3).allowed);
}

TEST_F(ClaimDoor, ADryRunGetsTheSameAnswerAndCountsNothing) {
  EXPECT_TRUE(create("a", 3, /*dryRun=*/true).allowed);
  EXPECT_EQ(door->inFlight(), 0u);
  EXPECT_TRUE(create("a", 3).allowed);
  EXPECT_FALSE(create("b", 1, /*dryRun=*/true).allowed);
}

TEST_F(ClaimDoor, ReadsOnlyCreatesOfClaimsAndRefusesWhatItCannotRead) {
  EXPECT_TRUE(answer(claimReview("acme", "a", claimJson("acme", "a", kDeviceClass, 8), false, "UPDATE")).allowed);
  AdmissionResponse unreadable =
      answer(claimReview("acme", "a", R"({"metadata":{"name":"a"},"spec":{"devices":{"requests":7}}})"));
  EXPECT_FALSE(unreadable.allowed);
  EXPECT_EQ(unreadable.code, 422);
  EXPECT_NE(unreadable.message.find("the created ResourceClaim cannot be read"), std::string::npos)
      << unreadable.message;
  // A claim of a device Tally does not sell passes.
  EXPECT_TRUE(answer(claimReview("acme", "nic", claimJson("acme", "nic", "nic.example.com", 4))).allowed);
}

TEST_F(ClaimDoor, ASnapshotNotSyncedRefusesClosed) {
  state::Writer::Options o;
  o.watched = {model::Kind::ResourceSlice};
  state::Writer unsynced(o);
  unsynced.flush();
  ClaimWebhook closed(unsynced.snapshots());
  auto request =
      runtime::admission::decodeAdmissionReview(claimReview("acme", "a", claimJson("acme", "a", kDeviceClass, 1)));
  ASSERT_TRUE(request);
  AdmissionResponse r = closed.review(*request, now).response;
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("[CacheNotSynced]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("ResourceSlice"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace tally::controller
