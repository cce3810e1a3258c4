// GPUReservationRecord YAML into the model's records: the seed's format, and
// every way a document can be refused while it is read.

#include "../src/yaml_guard.hpp"
#include "tally/codec/reservation_record.hpp"
#include "tally/common/rfc3339.hpp"

#include <gtest/gtest.h>

#include <chrono>
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

// Anchors of anchors: a few hundred bytes that expand to 10^9 nodes once loaded
// (what made a ledger fuzz run last past its time limit). Refused on the parser's
// events, naming the limit, before anything is expanded.
std::string aliasBomb(std::string_view head) {
  std::string text(head);
  text += "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *l" : "*l") + std::to_string(i - 1);
    text += "]\n";
  }
  return text;
}

TEST(LedgerFileYaml, AnAliasBombIsRefusedNamingTheLimit) {
  model::Ledger ledger;
  const auto started = std::chrono::steady_clock::now();
  addLedgerFile(ledger, aliasBomb(activeRecord() + "---\n"), "bomb.yaml");
  ASSERT_EQ(ledger.invalid.size(), 1u);
  EXPECT_TRUE(ledger.records.empty());  // the whole file: which of its documents to trust is not known
  EXPECT_EQ(ledger.invalid[0].source, "bomb.yaml");
  ASSERT_FALSE(ledger.invalid[0].problems.empty());
  EXPECT_NE(ledger.invalid[0].problems[0].message.find("more than 100000 nodes"), std::string::npos)
      << ledger.invalid[0].problems[0].message;
  auto record = decodeReservationRecord(aliasBomb(""), "one.yaml");
  ASSERT_FALSE(record);
  ASSERT_FALSE(record.error().problems.empty());
  EXPECT_NE(record.error().problems[0].message.find("aliases included"), std::string::npos)
      << record.error().problems[0].message;
  // Not a timing assertion on the machine: 10^9 nodes would take minutes, the
  // refusal takes the parse of 600 bytes; a generous bound tells them apart.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
}

TEST(LedgerFileYaml, AnchorsWithinTheLimitAreRead) {
  // An anchor and its alias in a record: the same value twice, read as written.
  std::string text = activeRecord();
  text.replace(text.find("organization: acme"), 18, "organization: &org acme");
  text.replace(text.find("billingReference: OPS-1042"), 26, "billingReference: *org");
  model::Ledger ledger;
  addLedgerFile(ledger, text, "anchored.yaml");
  ASSERT_TRUE(ledger.invalid.empty()) << ledger.invalid[0].problems[0].message;
  ASSERT_EQ(ledger.records.size(), 1u);
  EXPECT_EQ(ledger.records[0].billingReference, "acme");
  EXPECT_TRUE(yamlExpansionRefusal("a: &a [1, 2, 3]\nb: *a\nc: *a\n") == std::nullopt);
  YamlLimits tight;
  tight.maxNodes = 10;
  EXPECT_TRUE(yamlExpansionRefusal("a: &a [1, 2, 3]\nb: *a\nc: *a\n", tight).has_value());
  tight = {};
  tight.maxDepth = 3;
  auto deep = yamlExpansionRefusal("a: {b: {c: {d: 1}}}\n", tight);
  ASSERT_TRUE(deep.has_value());
  EXPECT_NE(deep->find("4 levels deep"), std::string::npos) << *deep;
}

}  // namespace
}  // namespace tally::codec
