// The Organization webhook: each refusal of an add-on change, decided on a
// hand-built cluster that holds pods (its route through the writer's thread:
// organization_webhook_concurrency_test.cpp).

#include "tally/controller/organization_webhook.hpp"

#include <gtest/gtest.h>

#include "organization_review.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/index.hpp"
#include "tally/model/usage.hpp"

namespace tally::controller {
namespace {

using namespace org_review;

TEST_F(OrganizationChanges, ReductionBelowWhatHoldersUseIsRefusedNamingThem) {
  AdmissionResponse r = change({{"h200-quota", 2}});
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
  EXPECT_EQ(r.code, 403);
  EXPECT_NE(r.message.find("pod/acme-ml/trainer: 2"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("gpudevice/acme-ml/held: 1"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, DryRunIsAnsweredTheSame) {
  AdmissionResponse r = change({{"h200-quota", 2}}, true);
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
}

TEST_F(OrganizationChanges, ReductionRefusedWhileHncReportsMoreInUse) {
  c.pods.clear();
  c.devices.clear();
  c.hrqs.at("acme/plan-quota").statusUsed.set(key, 3);
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 1}}), "AddonReductionBlocked"));
}

TEST_F(OrganizationChanges, ReductionDownToWhatIsUsedIsAdmitted) {
  c.pods.clear();
  AdmissionResponse r = change({{"h200-quota", 1}});
  EXPECT_TRUE(r.allowed) << r.message;
}

TEST_F(OrganizationChanges, IncreaseThatBreaksThePoolInvariantIsRefused) {
  AdmissionResponse r = change({{"h200-quota", 8}});
  EXPECT_TRUE(refusedWith(r, "InvariantBroken")) << r.message;
  EXPECT_TRUE(change({{"h200-quota", 7}}).allowed);
}

TEST_F(OrganizationChanges, IncreaseInAPoolClosedByAFailedAuditIsRefused) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "GateClosed"));
}

TEST_F(OrganizationChanges, PendingReservationsOwnGrantIsAdmittedAndNothingElse) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, model::ReservationState::Pending));
  c.classes.at("h200").gateOpen = false;  // the transaction's freeze
  AdmissionResponse own = change({{"h200-quota", 3}, {"h200-reserved", 1}});
  EXPECT_TRUE(own.allowed) << own.message;
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "TransactionInFlight"));
}

TEST_F(OrganizationChanges, AddonTheCatalogueDoesNotDefineIsRefused) {
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 3}, {"mystery", 1}}), "AddonUnknown"));
}

TEST_F(OrganizationChanges, OrganizationThisReplicaHasNotSeenIsRefusedClosed) {
  c.organizations.clear();
  EXPECT_TRUE(refusedWith(change({{"h200-quota", 4}}), "CacheNotSynced"));
}

TEST_F(OrganizationChanges, UnsyncedPodCacheIsRefusedClosed) {
  c.caches[model::Kind::Pod].synced = false;
  AdmissionResponse r = change({{"h200-quota", 2}});
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
  EXPECT_NE(r.message.find("Pod"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, UnreadableAssignmentIsInvalid) {
  model::TotalsCapacityView view(c, model::computeUsage(c));
  AdmissionResponse r =
      reviewOrganization(c, view, request(reviewJson(orgJson("not json"), orgJson(addons({{"h200-quota", 3}})))), {})
          .response;
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.code, 422) << r.message;
}

TEST_F(OrganizationChanges, CreateWithAddonsThatBreakThePoolInvariantIsRefused) {
  // 8 devices, spare 1, acme holds 3: 4 left to sell.
  put(c, ns("globex"));
  AdmissionResponse r = create("globex", {{"h200-quota", 5}});
  EXPECT_TRUE(refusedWith(r, "InvariantBroken")) << r.message;
  EXPECT_NE(r.message.find("organization globex"), std::string::npos) << r.message;
  EXPECT_TRUE(create("globex", {{"h200-quota", 4}}).allowed);
  EXPECT_TRUE(create("globex", {}).allowed);
}

TEST_F(OrganizationChanges, CreateWithAddonsInAPoolClosedByAFailedAuditIsRefused) {
  c.classes.at("h200").gateOpen = false;
  c.classes.at("h200").gateFailureId = "h200-0badc0de-1";
  AdmissionResponse r = create("globex", {{"h200-quota", 1}});
  EXPECT_TRUE(refusedWith(r, "GateClosed")) << r.message;
  EXPECT_TRUE(create("globex", {}).allowed);
}

TEST_F(OrganizationChanges, CreateWithAddonsDuringAnotherOrganizationsTransactionIsRefused) {
  c.ledger.records.push_back(record("gpu-res-1", "acme", "h200", 1, model::ReservationState::Pending));
  AdmissionResponse r = create("globex", {{"h200-quota", 1}});
  EXPECT_TRUE(refusedWith(r, "TransactionInFlight")) << r.message;
  EXPECT_NE(r.message.find("gpu-res-1"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, CreateIsRefusedClosedWhileACacheIsNotSynced) {
  c.caches[model::Kind::HierarchicalResourceQuota].synced = false;
  AdmissionResponse r = create("globex", {{"h200-quota", 1}});
  EXPECT_TRUE(refusedWith(r, "CacheNotSynced")) << r.message;
}

TEST_F(OrganizationChanges, RemovingAReservationAddonWhileItsRecordIsActiveIsRefusedNamingIt) {
  c.organizations.at("acme/acme").addons = {{"h200-quota", 3}, {"h200-reserved", 1}};
  c.hrqs.at("acme/plan-quota").hard.set(key, 4);
  c.ledger.records.push_back(record("gpu-res-7", "acme", "h200", 1, model::ReservationState::Active));
  model::TotalsCapacityView view(c, model::computeUsage(c));
  AdmissionResponse r =
      reviewOrganization(c, view,
                         request(reviewJson(orgJson(addons({{"h200-quota", 3}})),
                                            orgJson(addons({{"h200-quota", 3}, {"h200-reserved", 1}})))),
                         {})
          .response;
  EXPECT_TRUE(refusedWith(r, "AddonReductionBlocked")) << r.message;
  EXPECT_NE(r.message.find("gpu-res-7"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("releasing"), std::string::npos) << r.message;
}

TEST_F(OrganizationChanges, ChangeThatLeavesTheAddonsAloneIsAdmitted) {
  EXPECT_TRUE(change({{"h200-quota", 3}}).allowed);
}

}  // namespace
}  // namespace tally::controller
