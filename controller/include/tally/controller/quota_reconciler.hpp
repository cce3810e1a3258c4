#pragma once
// The quota controller (SPEC 5 "Quota"; leader only, keyed by Organization
// "namespace/name"): add-on assignments x billing plans -> the GPU keys of the
// organization's HRQ plan-quota (model::desiredPlanQuota), the project caps of
// project-specific reservations in each project's ResourceQuota project-quota
// (model::projectCaps), and the Organization's status.quotaUsage.accelerators
// from what HNC reports in the HRQ's status (model::acceleratorStatus).
//
// Quota is written with server-side apply under one field manager, forced: the
// apply body holds only Tally's keys, so other managers' keys stay as they are,
// a hand edit of a Tally key is taken back, and a key Tally no longer applies
// is removed by the API server. Level-based: each reconcile reads the HRQ and
// the ResourceQuota as the API server has them now (their spec and which keys
// Tally's manager owns) and writes only when they differ from the model's
// answer, so a restart or a resync writes nothing on a converged cluster.
// Fail closed: an organization whose quota the model cannot work out (the
// catalogue missing or unsynced, an add-on it does not define) is left as it
// is, with a Warning Event saying why.
//
// Events on the Organization: QuotaApplied, QuotaApplyFailed. Metrics:
// tally_controller_quota_applies_total{target,result} (target plan-quota,
// project-quota, status; result applied, unchanged, failed, unknown) and
// tally_controller_quota_orgs_converged (organizations whose plan-quota,
// project caps and status matched the model at their last reconcile).

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>

#include "tally/codec/quota_wire.hpp"
#include "tally/controller/leader_controller.hpp"
#include "tally/model/quota.hpp"
#include "tally/observability/metrics.hpp"

namespace tally::controller {

inline constexpr std::string_view kQuotaFieldManager = "tally-controller";

struct QuotaReconcilerOptions {
  std::string fieldManager = std::string(kQuotaFieldManager);
  std::string component = "tally-controller";  // Events' reportingComponent
  std::string instance;                        // Events' reportingInstance
  // Every organization is looked at again this often (events wake it earlier).
  std::chrono::milliseconds resync{300'000};
  observability::Registry* metrics = nullptr;
};

// What Tally reads back and writes of quotas and Organization status
// (codec/quota_wire.hpp).
using codec::acceleratorStatusPatch;
using codec::hrqApplyBody;
using codec::ObservedQuota;
using codec::observeQuota;
using codec::resourceQuotaApplyBody;

// Whether the object already holds exactly `desired` as Tally's keys: every
// value equal and owned by Tally, and Tally owning no other key.
bool quotaConverged(const ObservedQuota& observed, const model::ResourceList& desired);

// The leader-only controller "quota" (leader_controller.hpp).
class QuotaReconciler final : public LeaderController {
 public:
  QuotaReconciler(std::shared_ptr<runtime::Client> client, QuotaReconcilerOptions options);
  ~QuotaReconciler() override;

  // One Organization, "namespace/name".
  runtime::Result<runtime::ReconcileResult> reconcile(const std::string& key, std::stop_token stop) override;

  // state::Observer: organizations, HRQs, quotas, classes, billing plans and
  // the ledger wake the organizations they concern.
  void objectChanged(model::Kind kind, const std::string& key) override;
  void published(const state::Snapshot& snapshot) override;

 private:
  struct Metrics;
  enum class Outcome { Applied, Unchanged, Failed, Unknown };

  Outcome reconcilePlanQuota(const model::Cluster& cluster, const model::Organization& org, std::string& error);
  Outcome reconcileProjectCaps(const model::Cluster& cluster, const model::Organization& org, std::string& error);
  Outcome reconcileStatus(const model::Cluster& cluster, const model::Organization& org, std::string& error);
  void count(std::string_view target, Outcome outcome);
  void startTerm() override;
  void event(const model::Organization& org, const std::string& type, const std::string& reason,
             const std::string& message);
  void setConverged(const std::string& key, bool converged);

  QuotaReconcilerOptions options_;
  std::unique_ptr<Metrics> metrics_;

  std::mutex mu_;
  std::map<std::string, bool> converged_;
  // The last QuotaApplyFailed message per organization: repeated only when it changes.
  std::map<std::string, std::string> lastProblem_;

  // The writer thread's: what changed since the last publication.
  std::set<std::string> changedOrgs_;
  std::set<std::string> changedNamespaces_;
  bool wakeAll_ = false;
};

}  // namespace tally::controller
