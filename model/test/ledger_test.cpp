#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "tally/model/ledger.hpp"

namespace tally::model {
namespace {

std::string activeRecord(std::string extraSpec = "", std::string extraStatus = "") {
  return R"(apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: gpu-res-1042
spec:
  organization: acme
  project: ""
  profileId: h200
  devices: 2
  state: active
  requestedAt: 2026-10-01T09:00:00Z
  startsAt: 2026-10-02T00:00:00Z
  endsAt: ""
  addonId: h200-reserved
  billingReference: OPS-1042
  approvedBy:
    product: pat
    sre: sam
)" + extraSpec +
         R"(status:
  activatedAt: 2026-10-02T10:00:00Z
  releasedAt: ""
  evidenceRevision: ev-7f3
  reason: pilot
)" + extraStatus;
}

bool hasCode(const ParsedRecord& p, Code code) {
  for (const auto& r : p.invalid.problems) {
    if (r.code == code) return true;
  }
  return false;
}

TEST(LedgerRecord, ParsesTheSeedFormat) {
  auto p = parseReservationRecord(activeRecord(), "gpu-res-1042.yaml");
  ASSERT_TRUE(p.record) << (p.invalid.problems.empty() ? "" : p.invalid.problems.front().message);
  EXPECT_EQ(p.record->id, "gpu-res-1042");
  EXPECT_EQ(p.record->devices, 2);
  EXPECT_EQ(p.record->state, ReservationState::Active);
  EXPECT_EQ(p.record->activatedAt, parseRfc3339("2026-10-02T10:00:00Z"));
  EXPECT_FALSE(p.record->endsAt);
}

TEST(LedgerRecord, DeviceUuidIsRefused) {
  auto p = parseReservationRecord(activeRecord("", "  note: GPU-5f2a1c3e-9b1d-4e2f-8a7b-0c1d2e3f4a5b\n"), "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent));
  EXPECT_NE(p.invalid.problems.front().message.find("device UUID"), std::string::npos);
}

TEST(LedgerRecord, PciAddressIsRefused) {
  std::string text = activeRecord();
  text.replace(text.find("reason: pilot"), 13, "reason: moved 0000:3b:00.0");
  auto p = parseReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent));
}

TEST(LedgerRecord, FractionalTimestampIsNotMistakenForAPciAddress) {
  std::string text = activeRecord();
  text.replace(text.find("2026-10-02T10:00:00Z"), 20, "2026-10-02T10:04:05.123Z");
  EXPECT_TRUE(parseReservationRecord(text, "x.yaml").record);
}

TEST(LedgerRecord, SecretsPaymentDataAndHamiAnnotationsAreRefused) {
  for (std::string bad : std::vector<std::string>{"reason: password hunter2", "reason: card 4111 1111 1111 1111",
                          "reason: hami.io/vgpu-devices-allocated", "reason: -----BEGIN PRIVATE KEY-----"}) {
    std::string text = activeRecord();
    text.replace(text.find("reason: pilot"), 13, bad);
    auto p = parseReservationRecord(text, "x.yaml");
    EXPECT_FALSE(p.record) << bad;
    EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent)) << bad;
  }
}

TEST(LedgerRecord, UnknownStateIsRefusedByName) {
  std::string text = activeRecord();
  text.replace(text.find("state: active"), 13, "state: paused");
  auto p = parseReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
  EXPECT_EQ(p.invalid.id, "gpu-res-1042");
  EXPECT_EQ(p.invalid.profileId, "h200");
}

TEST(LedgerRecord, EndMustBeAfterStart) {
  std::string text = activeRecord();
  text.replace(text.find("endsAt: \"\""), 10, "endsAt: 2026-10-01T00:00:00Z");
  auto p = parseReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordTime));
}

TEST(LedgerRecord, ActiveRecordNeedsActivationTimeBecauseBillingStartsThere) {
  std::string text = activeRecord();
  text.replace(text.find("activatedAt: 2026-10-02T10:00:00Z"), 33, "activatedAt: \"\"");
  auto p = parseReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
}

TEST(LedgerRecord, PendingRecordMustNotBeActivated) {
  std::string text = activeRecord();
  text.replace(text.find("state: active"), 13, "state: pending");
  auto p = parseReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
}

TEST(LedgerRecord, UnknownFieldTypoIsRefused) {
  auto p = parseReservationRecord(activeRecord("  device: 3\n"), "x.yaml");
  ASSERT_FALSE(p.record);
  EXPECT_NE(p.invalid.problems.front().message.find("unknown field spec.device"), std::string::npos);
}

TEST(LedgerRecord, BadInputNeverThrows) {
  for (std::string bad : std::vector<std::string>{"", "[", "{a: [", "- 1\n- 2", "apiVersion: 3", "spec: 7", std::string(70000, 'a'),
                          "spec:\n  devices: 99999999999999999999\n", "spec:\n  devices: -1\n", "\t\x01\x02"}) {
    auto p = parseReservationRecord(bad, "bad.yaml");
    EXPECT_FALSE(p.record);
    EXPECT_FALSE(p.invalid.problems.empty());
  }
}

TEST(LedgerRecord, SameApproverForBothRolesIsRefused) {
  std::string text = activeRecord();
  text.replace(text.find("sre: sam"), 8, "sre: pat");
  EXPECT_FALSE(parseReservationRecord(text, "x.yaml").record);
}

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

TEST(Ledger, MultipleDocumentsInOneFileAreEachChecked) {
  Ledger ledger;
  std::string second = activeRecord();
  second.replace(second.find("gpu-res-1042"), 12, "gpu-res-1043");
  second.replace(second.find("sre: sam"), 8, "sre: pat");
  addToLedger(ledger, activeRecord() + "---\n" + second, "both.yaml");
  EXPECT_EQ(ledger.records.size(), 1u);
  ASSERT_EQ(ledger.invalid.size(), 1u);
  EXPECT_EQ(ledger.invalid[0].id, "gpu-res-1043");
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
