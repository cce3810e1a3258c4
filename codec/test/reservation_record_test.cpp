// GPUReservationRecord YAML into the model's records: the seed's format, and
// every way a document can be refused while it is read.

#include "tally/codec/reservation_record.hpp"
#include "tally/common/rfc3339.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tally::codec {
namespace {

using model::Code;

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

bool hasCode(const RecordResult& p, Code code) {
  if (p) return false;
  for (const auto& r : p.error().problems) {
    if (r.code == code) return true;
  }
  return false;
}

TEST(ReservationRecordYaml, ParsesTheSeedFormat) {
  auto p = decodeReservationRecord(activeRecord(), "gpu-res-1042.yaml");
  ASSERT_TRUE(p) << p.error().problems.front().message;
  EXPECT_EQ(p->id, "gpu-res-1042");
  EXPECT_EQ(p->devices, 2);
  EXPECT_EQ(p->state, model::ReservationState::Active);
  EXPECT_EQ(p->activatedAt, parseRfc3339("2026-10-02T10:00:00Z")->seconds);
  EXPECT_FALSE(p->endsAt);
}

TEST(ReservationRecordYaml, DeviceUuidIsRefused) {
  auto p = decodeReservationRecord(activeRecord("", "  note: GPU-5f2a1c3e-9b1d-4e2f-8a7b-0c1d2e3f4a5b\n"), "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent));
  EXPECT_NE(p.error().problems.front().message.find("device UUID"), std::string::npos);
}

TEST(ReservationRecordYaml, PciAddressIsRefused) {
  std::string text = activeRecord();
  text.replace(text.find("reason: pilot"), 13, "reason: moved 0000:3b:00.0");
  auto p = decodeReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent));
}

TEST(ReservationRecordYaml, FractionalTimestampIsNotMistakenForAPciAddress) {
  std::string text = activeRecord();
  text.replace(text.find("2026-10-02T10:00:00Z"), 20, "2026-10-02T10:04:05.123Z");
  EXPECT_TRUE(decodeReservationRecord(text, "x.yaml"));
}

TEST(ReservationRecordYaml, SecretsPaymentDataAndHamiAnnotationsAreRefused) {
  for (std::string bad :
       std::vector<std::string>{"reason: password hunter2", "reason: card 4111 1111 1111 1111",
                                "reason: hami.io/vgpu-devices-allocated", "reason: -----BEGIN PRIVATE KEY-----"}) {
    std::string text = activeRecord();
    text.replace(text.find("reason: pilot"), 13, bad);
    auto p = decodeReservationRecord(text, "x.yaml");
    EXPECT_FALSE(p) << bad;
    EXPECT_TRUE(hasCode(p, Code::RecordForbiddenContent)) << bad;
  }
}

TEST(ReservationRecordYaml, UnknownStateIsRefusedByName) {
  std::string text = activeRecord();
  text.replace(text.find("state: active"), 13, "state: paused");
  auto p = decodeReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
  EXPECT_EQ(p.error().id, "gpu-res-1042");
  EXPECT_EQ(p.error().profileId, "h200");
}

TEST(ReservationRecordYaml, EndMustBeAfterStart) {
  std::string text = activeRecord();
  text.replace(text.find("endsAt: \"\""), 10, "endsAt: 2026-10-01T00:00:00Z");
  auto p = decodeReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordTime));
}

TEST(ReservationRecordYaml, ActiveRecordNeedsActivationTimeBecauseBillingStartsThere) {
  std::string text = activeRecord();
  text.replace(text.find("activatedAt: 2026-10-02T10:00:00Z"), 33, "activatedAt: \"\"");
  auto p = decodeReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
}

TEST(ReservationRecordYaml, PendingRecordMustNotBeActivated) {
  std::string text = activeRecord();
  text.replace(text.find("state: active"), 13, "state: pending");
  auto p = decodeReservationRecord(text, "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_TRUE(hasCode(p, Code::RecordState));
}

TEST(ReservationRecordYaml, UnknownFieldTypoIsRefused) {
  auto p = decodeReservationRecord(activeRecord("  device: 3\n"), "x.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().problems.front().message.find("unknown field spec.device"), std::string::npos);
}

TEST(ReservationRecordYaml, BadInputNeverThrows) {
  for (std::string bad :
       std::vector<std::string>{"", "[", "{a: [", "- 1\n- 2", "apiVersion: 3", "spec: 7", std::string(70000, 'a'),
                                "spec:\n  devices: 99999999999999999999\n", "spec:\n  devices: -1\n", "\t\x01\x02"}) {
    auto p = decodeReservationRecord(bad, "bad.yaml");
    EXPECT_FALSE(p);
    EXPECT_FALSE(p.error().problems.empty());
  }
}

TEST(ReservationRecordYaml, SameApproverForBothRolesIsRefused) {
  std::string text = activeRecord();
  text.replace(text.find("sre: sam"), 8, "sre: pat");
  EXPECT_FALSE(decodeReservationRecord(text, "x.yaml"));
}

TEST(LedgerFileYaml, MultipleDocumentsInOneFileAreEachChecked) {
  model::Ledger ledger;
  std::string second = activeRecord();
  second.replace(second.find("gpu-res-1042"), 12, "gpu-res-1043");
  second.replace(second.find("sre: sam"), 8, "sre: pat");
  addLedgerFile(ledger, activeRecord() + "---\n" + second, "both.yaml");
  EXPECT_EQ(ledger.records.size(), 1u);
  ASSERT_EQ(ledger.invalid.size(), 1u);
  EXPECT_EQ(ledger.invalid[0].id, "gpu-res-1043");
}

// Found by the ledger ConfigMap fuzzer: a scalar where a mapping belongs threw out of yaml-cpp.
TEST(ReservationRecordYaml, ScalarsWhereMappingsBelongAreInvalidNotThrown) {
  model::Ledger ledger;
  addLedgerFile(ledger,
                "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata: 5\nspec: [1]\n",
                "odd.yaml");
  ASSERT_EQ(ledger.invalid.size(), 1u);
  EXPECT_TRUE(ledger.records.empty());
  EXPECT_EQ(ledger.invalid[0].source, "odd.yaml");
}

}  // namespace
}  // namespace tally::codec
