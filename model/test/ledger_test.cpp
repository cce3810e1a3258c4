#include <gtest/gtest.h>

#include "tally/model/testing/fixtures.hpp"
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

// A ledger revision of records, each in the file named after its id.
Ledger revision(std::vector<ReservationRecord> records) {
  Ledger ledger;
  ledger.loaded = true;
  for (auto& r : records) {
    r.source = r.id + ".yaml";
    ledger.records.push_back(std::move(r));
  }
  return ledger;
}

ReservationRecord rec(std::string id, ReservationState state, std::string pool = "h200") {
  return testing::record(std::move(id), "acme", std::move(pool), 1, state);
}

TEST(LedgerHistory, EveryChangeAlongTheStateMachineAndANewRecordPass) {
  using S = ReservationState;
  Ledger before = revision({rec("gpu-res-1", S::Pending, "a"), rec("gpu-res-2", S::Active, "b"),
                            rec("gpu-res-3", S::Releasing, "c"), rec("gpu-res-4", S::Pending, "d"),
                            rec("gpu-res-5", S::Released, "e")});
  Ledger after = revision({rec("gpu-res-1", S::Active, "a"), rec("gpu-res-2", S::Releasing, "b"),
                           rec("gpu-res-3", S::Released, "c"), rec("gpu-res-4", S::Canceled, "d"),
                           rec("gpu-res-5", S::Released, "e"), rec("gpu-res-6", S::Pending, "e")});
  EXPECT_EQ(checkLedgerHistory(after, &before), std::vector<LedgerProblem>{});
}

TEST(LedgerHistory, ActiveRecordBackToPendingIsATransitionProblem) {
  Ledger before = revision({rec("gpu-res-1", ReservationState::Active)});
  Ledger after = revision({rec("gpu-res-1", ReservationState::Pending)});
  auto problems = checkLedgerHistory(after, &before);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::Transition);
  EXPECT_EQ(problems[0].source, "gpu-res-1.yaml");
  EXPECT_EQ(problems[0].id, "gpu-res-1");
  EXPECT_NE(problems[0].message.find("active to pending"), std::string::npos) << problems[0].message;
}

TEST(LedgerHistory, DevicesChangedOnAnActiveRecordIsATransitionProblem) {
  Ledger before = revision({rec("gpu-res-1", ReservationState::Active)});
  Ledger after = revision({rec("gpu-res-1", ReservationState::Active)});
  after.records[0].devices = 3;
  auto problems = checkLedgerHistory(after, &before);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::Transition);
}

TEST(LedgerHistory, RecordMissingFromTheNewRevisionDisappeared) {
  Ledger before = revision({rec("gpu-res-1", ReservationState::Released), rec("gpu-res-2", ReservationState::Active)});
  Ledger after = revision({rec("gpu-res-2", ReservationState::Active)});
  auto problems = checkLedgerHistory(after, &before);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::Disappeared);
  EXPECT_EQ(problems[0].source, "gpu-res-1.yaml");
  EXPECT_EQ(problems[0].id, "gpu-res-1");
}

TEST(LedgerHistory, RecordMovedToAnotherFileHasNotDisappeared) {
  Ledger before = revision({rec("gpu-res-1", ReservationState::Active)});
  Ledger after = revision({rec("gpu-res-1", ReservationState::Active)});
  after.records[0].source = "2026/gpu-res-1.yaml";
  EXPECT_TRUE(checkLedgerHistory(after, &before).empty());
}

TEST(LedgerHistory, RecordThatBecameInvalidHasNotDisappeared) {
  Ledger before = revision({rec("gpu-res-1", ReservationState::Active)});
  Ledger after = revision({});
  after.invalid.push_back({"gpu-res-1.yaml", "gpu-res-1", "h200", {{Code::RecordSchema, "spec.devices is required"}}});
  EXPECT_TRUE(checkLedgerHistory(after, &before).empty());
}

TEST(LedgerHistory, SameIdInTwoFilesIsADuplicateNamedOnTheSecondFile) {
  Ledger ledger =
      revision({rec("gpu-res-1", ReservationState::Active, "a"), rec("gpu-res-1", ReservationState::Released, "b")});
  ledger.records[0].source = "a.yaml";
  ledger.records[1].source = "b.yaml";
  auto problems = checkLedgerHistory(ledger, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::DuplicateId);
  EXPECT_EQ(problems[0].source, "b.yaml");
  EXPECT_EQ(problems[0].id, "gpu-res-1");
  EXPECT_NE(problems[0].message.find("a.yaml"), std::string::npos) << problems[0].message;
}

TEST(LedgerHistory, InvalidRecordWithTheSameIdIsADuplicate) {
  Ledger ledger = revision({rec("gpu-res-1", ReservationState::Active)});
  ledger.invalid.push_back({"z.yaml", "gpu-res-1", "h200", {{Code::RecordState, "spec.state 'paused'"}}});
  auto problems = checkLedgerHistory(ledger, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::DuplicateId);
  EXPECT_EQ(problems[0].source, "z.yaml");
}

TEST(LedgerHistory, PendingAndReleasingInOnePoolAreMultipleTransactions) {
  Ledger ledger =
      revision({rec("gpu-res-1", ReservationState::Pending), rec("gpu-res-2", ReservationState::Releasing)});
  auto problems = checkLedgerHistory(ledger, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].rule, LedgerRule::MultipleTransactions);
  EXPECT_EQ(problems[0].id, "gpu-res-2");
  EXPECT_NE(problems[0].message.find("gpu-res-1"), std::string::npos) << problems[0].message;
  EXPECT_NE(problems[0].message.find("h200"), std::string::npos) << problems[0].message;
}

TEST(LedgerHistory, ThreePendingRecordsInOnePoolAreTwoProblems) {
  using S = ReservationState;
  Ledger ledger = revision({rec("gpu-res-1", S::Pending), rec("gpu-res-2", S::Pending), rec("gpu-res-3", S::Pending)});
  EXPECT_EQ(checkLedgerHistory(ledger, nullptr).size(), 2u);
}

TEST(LedgerHistory, TransactionsInDifferentPoolsAndSettledRecordsAreNotCounted) {
  using S = ReservationState;
  Ledger ledger = revision({rec("gpu-res-1", S::Pending, "a"), rec("gpu-res-2", S::Releasing, "b"),
                            rec("gpu-res-3", S::Active, "a"), rec("gpu-res-4", S::Released, "a"),
                            rec("gpu-res-5", S::Canceled, "a")});
  EXPECT_TRUE(checkLedgerHistory(ledger, nullptr).empty());
}

TEST(LedgerHistory, WithoutAPreviousRevisionNoRecordCanHaveDisappearedOrMoved) {
  Ledger ledger = revision({rec("gpu-res-1", ReservationState::Released)});
  EXPECT_TRUE(checkLedgerHistory(ledger).empty());
}

TEST(LedgerHistory, RuleNamesAreStable) {
  EXPECT_EQ(toString(LedgerRule::DuplicateId), "DuplicateId");
  EXPECT_EQ(toString(LedgerRule::MultipleTransactions), "MultipleTransactions");
  EXPECT_EQ(toString(LedgerRule::Transition), "Transition");
  EXPECT_EQ(toString(LedgerRule::Disappeared), "Disappeared");
}

TEST(LedgerMemory, AVanishedRecordStaysMissingInTheRevisionsAfter) {
  using S = ReservationState;
  auto first = advanceLedgerHistory({}, revision({rec("gpu-res-1", S::Active), rec("gpu-res-2", S::Pending, "a")}));
  EXPECT_TRUE(first.ledger.history.empty());
  auto second = advanceLedgerHistory(first.memory, revision({rec("gpu-res-2", S::Active, "a")}));
  ASSERT_EQ(second.ledger.history.size(), 1u);
  EXPECT_EQ(second.ledger.history[0].rule, LedgerRule::Disappeared);
  EXPECT_EQ(second.ledger.history[0].id, "gpu-res-1");
  EXPECT_EQ(second.ledger.history[0].source, "gpu-res-1.yaml");
  EXPECT_EQ(second.ledger.history[0].profileId, "h200");
  // Revision N+1 against revision N alone would see nothing wrong: the memory does.
  EXPECT_TRUE(checkLedgerHistory(revision({rec("gpu-res-2", S::Active, "a")}), &second.ledger).empty());
  auto third = advanceLedgerHistory(second.memory, revision({rec("gpu-res-2", S::Active, "a")}));
  ASSERT_EQ(third.ledger.history.size(), 1u);
  EXPECT_EQ(third.ledger.history[0].id, "gpu-res-1");
  // Put back (released, as the runbook asks): missing no more.
  auto fourth =
      advanceLedgerHistory(third.memory, revision({rec("gpu-res-1", S::Releasing), rec("gpu-res-2", S::Active, "a")}));
  EXPECT_TRUE(fourth.ledger.history.empty());
}

TEST(LedgerMemory, AForbiddenChangeStaysOneUntilTheRecordIsBackOnTheStateMachine) {
  using S = ReservationState;
  auto first = advanceLedgerHistory({}, revision({rec("gpu-res-1", S::Active)}));
  auto second = advanceLedgerHistory(first.memory, revision({rec("gpu-res-1", S::Pending)}));
  ASSERT_EQ(second.ledger.history.size(), 1u);
  EXPECT_EQ(second.ledger.history[0].rule, LedgerRule::Transition);
  EXPECT_EQ(second.memory.records.at("gpu-res-1").state, S::Active);  // the last accepted version
  auto third = advanceLedgerHistory(second.memory, revision({rec("gpu-res-1", S::Pending)}));
  ASSERT_EQ(third.ledger.history.size(), 1u);
  EXPECT_EQ(third.ledger.history[0].rule, LedgerRule::Transition);
  auto fourth = advanceLedgerHistory(third.memory, revision({rec("gpu-res-1", S::Releasing)}));
  EXPECT_TRUE(fourth.ledger.history.empty());
  EXPECT_EQ(fourth.memory.records.at("gpu-res-1").state, S::Releasing);
}

TEST(LedgerMemory, AnInvalidRecordKeepsItsIdPresentAndDuplicatesAreNotHistory) {
  using S = ReservationState;
  auto first = advanceLedgerHistory({}, revision({rec("gpu-res-1", S::Active)}));
  Ledger broken = revision({});
  broken.invalid.push_back({"gpu-res-1.yaml", "gpu-res-1", "h200", {{Code::RecordSchema, "broken"}}});
  auto second = advanceLedgerHistory(first.memory, broken);
  EXPECT_TRUE(second.ledger.history.empty());
  auto dup = advanceLedgerHistory(second.memory, revision({rec("gpu-res-1", S::Active), rec("gpu-res-1", S::Active)}));
  EXPECT_TRUE(dup.ledger.history.empty());  // DuplicateId is the audit's own check, not repeated as history
}

}  // namespace
}  // namespace tally::model
