// The pool auditor's pure parts on hand-built clusters (the status it writes,
// what it keeps, when it writes, its Events and stuck releases), the
// acknowledgement webhook's refusals, and the Alertmanager source (its parser
// on good and bad answers, and a poll of a local stand-in server).

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "tally/model/testing/fixtures.hpp"
#include "tally/runtime/http/testing/stand_in.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/controller/alert_source.hpp"
#include "tally/controller/class_webhook.hpp"
#include "tally/controller/pool_auditor.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace model::testing;
using runtime::admission::AdmissionRequest;
using runtime::admission::Operation;

constexpr std::string_view kT1 = "2027-01-15T08:00:00Z";
constexpr std::string_view kT2 = "2027-01-15T09:00:00Z";

model::Cluster twoNodes() {
  model::Cluster c = syncedCluster();
  put(c, passthroughClass());
  put(c, gpuNode("gpu-1", model::NodeMode::VmPassthrough, kH200, 4));
  put(c, gpuNode("gpu-2", model::NodeMode::VmPassthrough, kH200, 4));
  return c;
}

// The class object as the API server would hold it after the patch.
std::string classObject(const PoolStatus& status, const std::string& spec = "") {
  std::string patch = statusPatch(status);
  // {"status":{...}} -> the status member.
  std::string member = patch.substr(1, patch.size() - 2);
  return R"({"apiVersion":"gpu.tally.dev/v1alpha1","kind":"GPUDeviceClass","metadata":{"name":"h200","uid":"u-1"},)"
         R"("spec":{"workload":"vm","allocation":"passthrough","resourceName":"nvidia.com/GH100_H200_SXM_141GB")" +
         spec + "}," + member + "}";
}

PoolStatus reread(const PoolStatus& status) {
  auto back = decodePoolStatus(classObject(status));
  EXPECT_TRUE(back) << back.error().message;
  return back ? *back : PoolStatus{};
}

const Condition& condition(const PoolStatus& s, std::string_view type) {
  const Condition* c = findCondition(s.conditions, type);
  EXPECT_NE(c, nullptr) << type;
  static const Condition none;
  return c ? *c : none;
}

TEST(PoolStatusTest, AHealthyPoolPublishesEveryTermAndAnOpenGate) {
  model::Cluster c = twoNodes();
  const model::DeviceClass& cls = c.classes.at("h200");
  PoolStatus s = desiredStatus(auditOf(c, cls), cls, nullptr, kT1);
  EXPECT_EQ(s.nodeMode, "vm-passthrough");
  EXPECT_EQ(s.healthySchedulableDevices, 8);
  EXPECT_EQ(s.healthySchedulableUnits, 8);
  EXPECT_EQ(s.reservedDevices, 0);
  EXPECT_EQ(s.nonReservedHardQuota, 0);
  EXPECT_EQ(s.spareDevices, 1);
  EXPECT_EQ(s.headroom, 7);
  EXPECT_EQ(s.gateFailureId, "");
  EXPECT_EQ(s.lastAuditTime, kT1);
  EXPECT_TRUE(s.findings.empty());
  EXPECT_EQ(condition(s, kCreationOpenCondition).status, "True");
  EXPECT_EQ(condition(s, kCreationOpenCondition).reason, "Open");
  EXPECT_EQ(condition(s, kInvariantCondition).status, "True");
  EXPECT_EQ(condition(s, kInvariantCondition).reason, "Holds");
  EXPECT_NE(condition(s, kInvariantCondition)
                .message.find("healthy 8 >= reserved 0 + non-reserved hard quota 0 + spare 1 (headroom 7)"),
            std::string::npos)
      << condition(s, kInvariantCondition).message;
  EXPECT_EQ(condition(s, kInvariantCondition).lastTransitionTime, kT1);
  // An empty id is removed by the merge patch, not written as "".
  EXPECT_NE(statusPatch(s).find(R"("gateFailureId":null)"), std::string::npos);
  // What is written is read back identically, by the auditor and by the doors' codec.
  EXPECT_EQ(reread(s), s);
  auto decoded = codec::decodeText<codec::DeviceClassCodec>(classObject(s));
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_TRUE(decoded->gateOpen);
  EXPECT_EQ(decoded->gateFailureId, "");
  EXPECT_EQ(decoded->gateReason, condition(s, kCreationOpenCondition).message);
}

// A shared pool's row is all in shares, so that the dashboard's figures add up:
// healthy 6 >= reserved 0 + quota 3 + spare 2 (headroom 1), never a device count
// beside share counts. The device counts stay beside them, named as such.
TEST(PoolStatusTest, ASharedPoolPublishesEveryFigureInShares) {
  model::Cluster c = syncedCluster();
  put(c, sharedClass("v100-8g", 16384, 8192, 25, 4));  // 2 shares per GPU
  auto n = gpuNode("hami-1", model::NodeMode::PodHami, kHamiGpu, 20);
  n.inventory = std::vector{parent("g0", true, kHamiGpu), parent("g1", true, kHamiGpu), parent("g2", true, kHamiGpu)};
  put(c, n);
  put(c, org("acme"));
  put(c, hrq("acme", "plan-quota", model::quotaKey(kHamiGpu), 3));
  const model::DeviceClass& cls = c.classes.at("v100-8g");
  PoolStatus s = desiredStatus(auditOf(c, cls), cls, nullptr, kT1);
  EXPECT_EQ(s.quotaUnit, "shares");
  EXPECT_EQ(s.healthySchedulableUnits, 6);
  EXPECT_EQ(s.reservedUnits, 0);
  EXPECT_EQ(s.nonReservedHardQuota, 3);
  EXPECT_EQ(s.spareUnits, 2);
  EXPECT_EQ(s.headroom, s.healthySchedulableUnits - s.reservedUnits - s.nonReservedHardQuota - s.spareUnits);
  EXPECT_EQ(s.healthySchedulableDevices, 3);
  EXPECT_EQ(s.spareDevices, 1);
  EXPECT_EQ(reread(s), s);
  // A passthrough pool's unit is the device.
  model::Cluster d = twoNodes();
  PoolStatus p = desiredStatus(auditOf(d, d.classes.at("h200")), d.classes.at("h200"), nullptr, kT1);
  EXPECT_EQ(p.quotaUnit, "devices");
  EXPECT_EQ(p.spareUnits, p.spareDevices);
  EXPECT_EQ(p.healthySchedulableUnits, p.healthySchedulableDevices);
}

TEST(PoolStatusTest, ADuplicateReservationIdIsAFindingWithItsSubject) {
  model::Cluster c = twoNodes();
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, model::ReservationState::Active));
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, model::ReservationState::Active));
  const model::DeviceClass& cls = c.classes.at("h200");
  PoolStatus s = desiredStatus(auditOf(c, cls), cls, nullptr, kT1);
  EXPECT_EQ(condition(s, kCreationOpenCondition).reason, "AuditFailed");
  bool duplicate = false;
  for (const auto& f : s.findings) duplicate |= f.code == "DuplicateReservationId" && f.subject == "record/gpu-res-1";
  EXPECT_TRUE(duplicate);
  EXPECT_EQ(reread(s), s);
}

TEST(PoolStatusTest, AFailureClosesTheGateKeepsItsIdAndTheTransitionTimes) {
  model::Cluster c = twoNodes();
  c.alerts = {{"GpuXidErrors", "h200"}};
  const model::DeviceClass& cls = c.classes.at("h200");
  PoolStatus first = desiredStatus(auditOf(c, cls), cls, nullptr, kT1);
  EXPECT_EQ(condition(first, kCreationOpenCondition).status, "False");
  EXPECT_EQ(condition(first, kCreationOpenCondition).reason, "AuditFailed");
  ASSERT_FALSE(first.gateFailureId.empty());
  EXPECT_TRUE(first.gateFailureId.starts_with("h200-")) << first.gateFailureId;
  ASSERT_EQ(first.findings.size(), 1u);
  EXPECT_EQ(first.findings[0].code, "ActiveAlert");
  EXPECT_EQ(first.findings[0].subject, "alert/GpuXidErrors");
  EXPECT_EQ(reread(first), first);

  // The doors read the closed gate and its id back.
  auto decoded = codec::decodeText<codec::DeviceClassCodec>(classObject(first));
  ASSERT_TRUE(decoded) << decoded.error().describe();
  EXPECT_FALSE(decoded->gateOpen);
  EXPECT_EQ(decoded->gateFailureId, first.gateFailureId);

  // An hour later, on the class as published: the same failure keeps its id,
  // the conditions keep their transition time, and nothing but lastAuditTime moved.
  model::Cluster later = c;
  later.now += 3600;
  later.markAllSynced();  // the caches were confirmed meanwhile
  PoolStatus second = desiredStatus(auditOf(later, *decoded), *decoded, &first, kT2);
  EXPECT_EQ(second.gateFailureId, first.gateFailureId);
  EXPECT_EQ(condition(second, kCreationOpenCondition).lastTransitionTime, kT1);
  EXPECT_EQ(condition(second, kInvariantCondition).lastTransitionTime, kT1);
  EXPECT_TRUE(second.sameAs(first));
  EXPECT_FALSE(second == first);  // lastAuditTime
  EXPECT_TRUE(statusEvents("h200", &first, second).empty());

  // The findings clear: closed until acknowledged, the transition time stays (still False).
  later.alerts.clear();
  PoolStatus cleared = desiredStatus(auditOf(later, *decoded), *decoded, &second, kT2);
  EXPECT_FALSE(cleared.sameAs(second));
  EXPECT_EQ(condition(cleared, kCreationOpenCondition).reason, "AwaitingAcknowledgement");
  EXPECT_EQ(condition(cleared, kCreationOpenCondition).lastTransitionTime, kT1);
  EXPECT_EQ(cleared.gateFailureId, first.gateFailureId);
  auto events = statusEvents("h200", &second, cleared);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "CreationClosed");
  EXPECT_NE(events[0].message.find("AwaitingAcknowledgement"), std::string::npos);

  // Two people acknowledge: open again, with a new transition time, and no id.
  model::DeviceClass acked = *decoded;
  acked.acknowledgements = {{first.gateFailureId, "product", "alice@x"}, {first.gateFailureId, "sre", "bob@x"}};
  PoolStatus open = desiredStatus(auditOf(later, acked), acked, &cleared, kT2);
  EXPECT_EQ(condition(open, kCreationOpenCondition).status, "True");
  EXPECT_EQ(condition(open, kCreationOpenCondition).lastTransitionTime, kT2);
  EXPECT_EQ(open.gateFailureId, "");
  events = statusEvents("h200", &cleared, open);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "Normal");
  EXPECT_EQ(events[0].reason, "CreationOpened");

  // One person in both roles does not reopen it.
  model::DeviceClass alone = *decoded;
  alone.acknowledgements = {{first.gateFailureId, "product", "alice@x"}, {first.gateFailureId, "sre", "alice@x"}};
  PoolStatus still = desiredStatus(auditOf(later, alone), alone, &cleared, kT2);
  EXPECT_EQ(condition(still, kCreationOpenCondition).status, "False");
  EXPECT_EQ(condition(still, kCreationOpenCondition).reason, "AwaitingAcknowledgement");
  EXPECT_NE(condition(still, kCreationOpenCondition).message.find("two different identities"), std::string::npos)
      << condition(still, kCreationOpenCondition).message;
  EXPECT_EQ(still.gateFailureId, first.gateFailureId);
}

TEST(PoolStatusTest, EventsOnTheFirstAuditAndOnAnInvariantChange) {
  model::Cluster c = twoNodes();
  const model::DeviceClass& cls = c.classes.at("h200");
  PoolStatus open = desiredStatus(auditOf(c, cls), cls, nullptr, kT1);
  auto events = statusEvents("h200", nullptr, open);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].reason, "CreationOpened");
  EXPECT_EQ(events[1].reason, "InvariantHolds");

  // 9 devices of hard quota on 8: broken, and the gate closes with it.
  model::Cluster over = c;
  put(over, ns("acme"));
  model::Organization acme = org("acme");
  acme.ns = "acme";
  put(over, acme);
  put(over, hrq("acme", "plan-quota", "requests." + std::string(kH200), 9));
  PoolStatus broken = desiredStatus(auditOf(over, cls), cls, &open, kT2);
  EXPECT_EQ(condition(broken, kInvariantCondition).status, "False");
  EXPECT_EQ(condition(broken, kInvariantCondition).reason, "InvariantBroken");
  EXPECT_EQ(condition(broken, kInvariantCondition).lastTransitionTime, kT2);
  EXPECT_LT(broken.headroom, 0);
  events = statusEvents("h200", &open, broken);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "Warning");
  EXPECT_EQ(events[0].reason, "CreationClosed");
  EXPECT_NE(events[0].message.find(broken.gateFailureId), std::string::npos);
  EXPECT_EQ(events[1].reason, "InvariantBroken");
}

TEST(PoolStatusTest, ATransactionInFlightAndAPauseNameTheirReason) {
  // The condition's reason is the model's (model::GateReason), whatever the message says.
  model::GateState transaction{
      false, "", "gpu-res-9", false, "findings cleared, and more", model::GateReason::TransactionInFlight};
  EXPECT_EQ(gateReason(transaction), "TransactionInFlight");
  model::GateState paused{false, "", "", true, "paused", model::GateReason::Paused};
  EXPECT_EQ(gateReason(paused), "Paused");
  EXPECT_EQ(gateReason(model::GateState{}), "Open");
  model::Cluster quiet = twoNodes();
  model::DeviceClass cls = quiet.classes.at("h200");
  cls.creationPaused = true;
  PoolStatus s = desiredStatus(auditOf(quiet, cls), cls, nullptr, kT1);
  EXPECT_EQ(condition(s, kCreationOpenCondition).status, "False");
  EXPECT_EQ(condition(s, kCreationOpenCondition).reason, "Paused");
  EXPECT_EQ(s.gateFailureId, "");
}

TEST(PoolStatusTest, AnAbsentStatusIsEmptyAndABrokenOneIsAnError) {
  auto none = decodePoolStatus(R"({"metadata":{"name":"h200"},"spec":{}})");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, PoolStatus{});
  EXPECT_FALSE(decodePoolStatus("{not json"));
  EXPECT_FALSE(decodePoolStatus(R"({"status":[]})"));
  EXPECT_FALSE(decodePoolStatus(R"({"status":{"findings":{}}})"));
}

// --- The acknowledgement webhook --------------------------------------------

std::string withAcks(const std::string& acks, const std::string& failureId) {
  return R"({"metadata":{"name":"h200"},"spec":{"allocation":"passthrough","gateAcknowledgements":[)" + acks +
         R"(]},"status":{"gateFailureId":")" + failureId + R"("}})";
}

std::string ack(const std::string& failure, const std::string& role, const std::string& who,
                const std::string& note = "") {
  return R"({"failureId":")" + failure + R"(","role":")" + role + R"(","identity":")" + who + R"(")" +
         (note.empty() ? "" : R"(,"note":")" + note + R"(")") + "}";
}

// Who holds which role of the review, as RBAC would answer; every question asked is kept.
struct HeldRoles final : AcknowledgementRoles {
  std::map<std::string, std::set<std::string>> roles;  // user -> roles; "*": every user holds them
  bool reachable = true;
  std::vector<std::string> asked;  // "user role pool"
  RoleCheck check(const runtime::admission::UserInfo& user, std::string_view role, std::string_view pool) override {
    asked.push_back(user.username + " " + std::string(role) + " " + std::string(pool));
    if (!reachable) return {RoleCheck::Verdict::Unknown, "SubjectAccessReview failed: connection refused"};
    for (const auto& who : {user.username, std::string("*")}) {
      auto it = roles.find(who);
      if (it != roles.end() && it->second.contains(std::string(role))) return {RoleCheck::Verdict::Allowed, ""};
    }
    return {RoleCheck::Verdict::Denied, "no RBAC rule grants it"};
  }
};

runtime::admission::AdmissionResponse review(const std::string& before, const std::string& after,
                                             const std::string& user, std::string subResource = "",
                                             AcknowledgementRoles* roles = nullptr) {
  AdmissionRequest r;
  r.operation = Operation::kUpdate;
  r.name = "h200";
  r.subResource = std::move(subResource);
  r.userInfo.username = user;
  r.oldObject = simdjson::padded_string(before);
  r.object = simdjson::padded_string(after);
  HeldRoles everyone;
  everyone.roles["*"] = {"product", "sre"};
  return reviewDeviceClass(r, roles ? *roles : everyone).response;
}

TEST(ClassWebhookTest, AnIdentityAcknowledgesTheCurrentFailureForItselfOnce) {
  const std::string id = "h200-0a1b2c3d-1800000000";
  const std::string none = withAcks("", id);
  EXPECT_TRUE(review(none, withAcks(ack(id, "product", "alice@x"), id), "alice@x").allowed);

  // Someone else's name.
  auto other = review(none, withAcks(ack(id, "product", "alice@x"), id), "mallory@x");
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.code, 403);
  EXPECT_NE(other.message.find("[AckIdentityMismatch]"), std::string::npos) << other.message;
  EXPECT_NE(other.message.find("mallory@x"), std::string::npos);

  // Another failure than the published one.
  auto stale = review(none, withAcks(ack("h200-ffffffff-1", "sre", "bob@x"), id), "bob@x");
  EXPECT_FALSE(stale.allowed);
  EXPECT_NE(stale.message.find("[AckWrongFailure]"), std::string::npos) << stale.message;
  EXPECT_NE(stale.message.find(id), std::string::npos);

  // No failure published at all.
  auto nothing = review(withAcks("", ""), withAcks(ack(id, "sre", "bob@x"), ""), "bob@x");
  EXPECT_FALSE(nothing.allowed);
  EXPECT_NE(nothing.message.find("[AckNoFailure]"), std::string::npos) << nothing.message;

  // The same identity in the other role: refused, the first one kept.
  const std::string one = withAcks(ack(id, "product", "alice@x"), id);
  auto twice = review(one, withAcks(ack(id, "product", "alice@x") + "," + ack(id, "sre", "alice@x"), id), "alice@x");
  EXPECT_FALSE(twice.allowed);
  EXPECT_NE(twice.message.find("[AckTwice]"), std::string::npos) << twice.message;

  // A second person adds sre next to alice's unchanged product ack.
  EXPECT_TRUE(
      review(one, withAcks(ack(id, "product", "alice@x") + "," + ack(id, "sre", "bob@x"), id), "bob@x").allowed);
  // Changing someone else's acknowledgement (its note) is a new one by them.
  EXPECT_FALSE(review(one, withAcks(ack(id, "product", "alice@x", "edited"), id), "bob@x").allowed);
  // Removals are allowed, by anyone.
  EXPECT_TRUE(review(one, none, "carol@x").allowed);
  // Status writes and other operations are not this webhook's.
  EXPECT_TRUE(review(none, withAcks(ack(id, "product", "alice@x"), id), "x", "status").allowed);
  // What cannot be read is refused.
  auto broken = review(none, R"({"spec":{"gateAcknowledgements":{}}})", "alice@x");
  EXPECT_FALSE(broken.allowed);
  EXPECT_EQ(broken.code, 422);
}

// Product pat, SRE sam and sara: the roles RBAC grants them.
struct AcknowledgementRolesTest : ::testing::Test {
  const std::string id = "h200-0a1b2c3d-1800000000";
  const std::string none = withAcks("", id);
  HeldRoles held;
  void SetUp() override {
    held.roles["pat@x"] = {"product"};
    held.roles["sam@x"] = {"sre"};
    held.roles["sara@x"] = {"sre"};
  }
  runtime::admission::AdmissionResponse as(const std::string& user, const std::string& before,
                                           const std::string& after) {
    return review(before, after, user, "", &held);
  }
};

TEST_F(AcknowledgementRolesTest, TwoSresCannotReopenAPoolTheSecondAcknowledgingAsProductIsRefused) {
  const std::string sam = withAcks(ack(id, "sre", "sam@x"), id);
  ASSERT_TRUE(as("sam@x", none, sam).allowed);
  auto r = as("sara@x", sam, withAcks(ack(id, "sre", "sam@x") + "," + ack(id, "product", "sara@x"), id));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 403);
  EXPECT_NE(r.message.find("[AckRoleNotAuthorised]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("user sara@x is not authorised for the product role"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("acknowledge-product"), std::string::npos) << r.message;
  // Product pat next to sam: one of each role.
  EXPECT_TRUE(as("pat@x", sam, withAcks(ack(id, "sre", "sam@x") + "," + ack(id, "product", "pat@x"), id)).allowed);
}

TEST_F(AcknowledgementRolesTest, EachNewAcknowledgementIsCheckedForItsRoleAndPoolOnly) {
  const std::string sam = withAcks(ack(id, "sre", "sam@x"), id);
  ASSERT_TRUE(as("pat@x", sam, withAcks(ack(id, "sre", "sam@x") + "," + ack(id, "product", "pat@x"), id)).allowed);
  // sam's unchanged acknowledgement is not asked about again; removals ask nothing.
  EXPECT_EQ(held.asked, std::vector<std::string>{"pat@x product h200"});
  EXPECT_TRUE(as("sara@x", sam, none).allowed);
  EXPECT_EQ(held.asked.size(), 1u);
}

TEST_F(AcknowledgementRolesTest, ARoleThatCannotBeCheckedIsRefusedClosed) {
  held.reachable = false;
  auto r = as("sam@x", none, withAcks(ack(id, "sre", "sam@x"), id));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("[AckRoleUnverified]"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("connection refused"), std::string::npos) << r.message;
}

TEST_F(AcknowledgementRolesTest, ARoleOutsideTheReviewIsRefused) {
  held.roles["pat@x"].insert("admin");
  auto r = as("pat@x", none, withAcks(ack(id, "admin", "pat@x"), id));
  EXPECT_FALSE(r.allowed);
  EXPECT_NE(r.message.find("[AckUnknownRole]"), std::string::npos) << r.message;
}

// --- The Alertmanager source --------------------------------------------------

constexpr std::string_view kAlerts = R"([
  {"labels":{"alertname":"GpuXidErrors","gpu_pool":"h200","severity":"page"},"status":{"state":"active"},
   "fingerprint":"f1"},
  {"labels":{"alertname":"NodeDown"},"status":{"state":"active"}},
  {"labels":{"alertname":"Silenced","gpu_pool":"h200"},"status":{"state":"suppressed"}},
  {"labels":{"gpu_pool":"a100-10c"},"fingerprint":"abc123"}
])";

TEST(AlertParserTest, PoolAlertsAreNamedAndTheRestIgnored) {
  auto alerts = parseAlerts(kAlerts, "gpu_pool");
  ASSERT_TRUE(alerts) << alerts.error();
  ASSERT_EQ(alerts->size(), 2u);
  EXPECT_EQ((*alerts)[0], (model::ActiveAlert{"GpuXidErrors", "h200"}));
  EXPECT_EQ((*alerts)[1], (model::ActiveAlert{"abc123", "a100-10c"}));
  auto other = parseAlerts(kAlerts, "pool");
  ASSERT_TRUE(other);
  EXPECT_TRUE(other->empty());
  EXPECT_TRUE(parseAlerts("[]", "gpu_pool"));
}

TEST(AlertParserTest, BadAnswersAreErrorsNeverCrashes) {
  for (std::string_view bad : {"", "{", "null", R"({"alerts":[]})", "[1]", R"([{"status":{}}])",
                               R"([{"labels":{"gpu_pool":7}}])", R"([{"labels":{},"status":{"state":3}}])",
                               "[{\"labels\":{\"alertname\":\"x\",\"gpu_pool\":\"h200\"}}", "\xff\xfe"}) {
    auto parsed = parseAlerts(bad, "gpu_pool");
    EXPECT_FALSE(parsed) << "accepted: " << bad;
    if (!parsed) {
      EXPECT_FALSE(parsed.error().empty());
    }
  }
  // Every prefix and random byte changes of a good answer: parsed or refused.
  const std::string good(kAlerts);
  for (std::size_t n = 0; n < good.size(); ++n) (void)parseAlerts(std::string_view(good).substr(0, n), "gpu_pool");
  std::mt19937 rng(17);
  for (int i = 0; i < 2000; ++i) {
    std::string s = good;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng() % 256);
    auto parsed = parseAlerts(s, "gpu_pool");
    if (parsed) {
      for (const auto& a : *parsed) EXPECT_FALSE(a.pool.empty());
    }
  }
}

TEST(AlertParserTest, AnUnreachableAlertmanagerFailsEveryPool) {
  model::Cluster c = twoNodes();
  put(c, vgpuClass());
  c.alerts = unreachableAlerts();
  for (const auto& name : {"h200", "a100-10c"}) {
    PoolAudit a = auditOf(c, c.classes.at(name));
    EXPECT_FALSE(a.gate.open) << name;
    bool found = false;
    for (const auto& f : a.findings) found |= f.code == model::FindingCode::ActiveAlert;
    EXPECT_TRUE(found) << name;
  }
}

using runtime::http::testing::StandIn;

TEST(AlertSourceTest, PollsHandTheAlertsToTheWriterAndFailClosed) {
  StandIn server;
  state::Writer writer({});
  int woken = 0;
  AlertSourceOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.timeout = std::chrono::milliseconds(2'000);
  o.changed = [&] { ++woken; };
  AlertSource source(writer, o);
  auto alerts = [&] {
    writer.flush();
    return writer.snapshots().read()->cluster().alerts;
  };

  server.answer("200 OK", std::string(kAlerts));
  source.pollOnce();
  EXPECT_EQ(alerts(), (std::vector<model::ActiveAlert>{{"GpuXidErrors", "h200"}, {"abc123", "a100-10c"}}));
  EXPECT_EQ(server.lastRequest(), "GET /api/v2/alerts?active=true&silenced=false&inhibited=false HTTP/1.1");
  EXPECT_EQ(woken, 1);
  source.pollOnce();  // the same alerts: no wake-up
  alerts();
  EXPECT_EQ(woken, 1);

  server.answer("500 Internal Server Error", "oops");
  source.pollOnce();
  EXPECT_EQ(alerts(), unreachableAlerts());
  EXPECT_EQ(woken, 2);

  server.answer("200 OK", "<html>");
  source.pollOnce();
  EXPECT_EQ(alerts(), unreachableAlerts());

  server.answer("200 OK", "[]");
  source.pollOnce();
  EXPECT_TRUE(alerts().empty());

  // Nobody listens there.
  AlertSourceOptions closed = o;
  closed.url = "http://127.0.0.1:1";
  AlertSource gone(writer, closed);
  gone.pollOnce();
  EXPECT_EQ(alerts(), unreachableAlerts());
  AlertSourceOptions bad = o;
  bad.url = "https://alertmanager:9093";
  AlertSource wrong(writer, bad);
  writer.flush();
  wrong.pollOnce();
  EXPECT_EQ(alerts(), unreachableAlerts());
}

}  // namespace
}  // namespace tally::controller
