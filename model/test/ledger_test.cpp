#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "tally/model/ledger.hpp"

namespace tally::model {
namespace {

TEST(StateMachine, LegalTransitions) {
  using S = ReservationState;
  EXPECT_TRUE(transitionAllowed(S::Pending, S::Active));
  EXPECT_TRUE(transitionAllowed(S::Pending, S::Canceled));
  EXPECT_TRUE(transitionAllowed(S::Active, S::Releasing));
  EXPECT_TRUE(transitionAllowed(S::Releasing, S::Released));
}

TEST(StateMachine, IllegalTransitionsAreRefused) {
  using S = ReservationState;
  EXPECT_FALSE(transitionAllowed(S::Pending, S::Released));
  EXPECT_FALSE(transitionAllowed(S::Active, S::Released));
  EXPECT_FALSE(transitionAllowed(S::Active, S::Canceled));
  EXPECT_FALSE(transitionAllowed(S::Released, S::Active));
  EXPECT_FALSE(transitionAllowed(S::Canceled, S::Pending));
  EXPECT_FALSE(transitionAllowed(S::Releasing, S::Active));
  auto before = testing::record("gpu-res-1", "acme", "h200", 2, S::Active);
  auto after = testing::record("gpu-res-1", "acme", "h200", 2, S::Released);
  auto refusal = checkRecordTransition(before, after);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, Code::RecordTransition);
  EXPECT_NE(refusal->message.find("active to released"), std::string::npos);
}

bool hasCode(const std::vector<Refusal>& refusals, Code code) {
  for (const auto& r : refusals) {
    if (r.code == code) return true;
  }
  return false;
}

TEST(RecordValidation, RecordsOfEveryStateFromTheFixtureAreValid) {
  using S = ReservationState;
  for (S state : {S::Pending, S::Active, S::Releasing, S::Released, S::Canceled}) {
    EXPECT_TRUE(validateRecord(testing::record("gpu-res-1", "acme", "h200", 1, state)).empty()) << toString(state);
  }
}

TEST(RecordValidation, EndBeforeStartIsRefused) {
  auto r = testing::record("gpu-res-1", "acme", "h200", 1, ReservationState::Pending);
  r.endsAt = *r.startsAt - 1;
  EXPECT_TRUE(hasCode(validateRecord(r), Code::RecordTime));
}

TEST(RecordValidation, ActiveRecordWithoutActivationTimeIsRefusedBecauseBillingStartsThere) {
  auto r = testing::record("gpu-res-1", "acme", "h200", 1, ReservationState::Active);
  r.activatedAt.reset();
  EXPECT_TRUE(hasCode(validateRecord(r), Code::RecordState));
}

TEST(RecordValidation, PendingRecordWithActivationTimeIsRefused) {
  auto r = testing::record("gpu-res-1", "acme", "h200", 1, ReservationState::Pending);
  r.activatedAt = *r.requestedAt + 10;
  EXPECT_TRUE(hasCode(validateRecord(r), Code::RecordState));
}

TEST(RecordValidation, SameApproverForBothRolesIsRefused) {
  auto r = testing::record("gpu-res-1", "acme", "h200", 1, ReservationState::Active);
  r.approvedBySre = r.approvedByProduct;
  EXPECT_TRUE(hasCode(validateRecord(r), Code::RecordSchema));
}

TEST(RecordValidation, IdNotShapedLikeATicketIsRefused) {
  auto r = testing::record("reservation-1", "acme", "h200", 1, ReservationState::Pending);
  EXPECT_TRUE(hasCode(validateRecord(r), Code::RecordSchema));
}

TEST(ForbiddenContent, PhysicalIdentifiersSecretsPaymentDataAndHamiAnnotationsAreFound) {
  EXPECT_NE(findForbiddenContent("GPU-5f2a1c3e-9b1d-4e2f-8a7b-0c1d2e3f4a5b").value_or("").find("device UUID"),
            std::string::npos);
  EXPECT_NE(findForbiddenContent("moved 0000:3b:00.0").value_or("").find("PCI address"), std::string::npos);
  EXPECT_TRUE(findForbiddenContent("password hunter2"));
  EXPECT_TRUE(findForbiddenContent("card 4111 1111 1111 1111"));
  EXPECT_TRUE(findForbiddenContent("hami.io/vgpu-devices-allocated"));
  EXPECT_FALSE(findForbiddenContent("activatedAt: 2026-10-02T10:04:05.123Z"));
}

TEST(Rfc3339, ParsesOffsetsAndRejectsNonsense) {
  EXPECT_EQ(parseRfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parseRfc3339("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(parseRfc3339("2024-02-29T00:00:00Z"), 1709164800);
  EXPECT_FALSE(parseRfc3339("2023-02-29T00:00:00Z"));
  EXPECT_FALSE(parseRfc3339("2026-13-01T00:00:00Z"));
  EXPECT_FALSE(parseRfc3339("yesterday"));
  EXPECT_FALSE(parseRfc3339("2026-01-01T00:00:00"));
  EXPECT_EQ(formatRfc3339(1709164800), "2024-02-29T00:00:00Z");
}

}  // namespace
}  // namespace tally::model
