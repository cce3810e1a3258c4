#include "tally/controller/quota_reconciler.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/quantity.hpp"

namespace tally::controller {

namespace obs = tally::observability;
using runtime::ReconcileResult;

namespace {

// A quota object codec could not read, said as the runtime says a decode error.
std::string unreadable(const codec::DecodeError& e) {
  return runtime::Error(runtime::ErrorCode::kDecode, e.describe()).describe();
}

const runtime::Resource kHrqs = runtime::Resource::of("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas");
const runtime::Resource kResourceQuotas = runtime::Resource::core("resourcequotas");
const runtime::Resource kOrganizations = runtime::Resource::of("kube-dc.com", "v1", "organizations");

std::string describe(const model::ResourceList& hard) {
  std::string out;
  for (const auto& [key, amount] : hard) out += fmt::format("{}{}={}", out.empty() ? "" : ", ", key, amount);
  return out.empty() ? "(none)" : out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : "; ") + i;
  return out;
}

}  // namespace

bool quotaConverged(const ObservedQuota& observed, const model::ResourceList& desired) {
  if (!observed.exists) return desired.empty();
  std::set<std::string> keys;
  for (const auto& [key, amount] : desired) {
    keys.insert(key);
    auto it = observed.hard.find(key);
    if (it == observed.hard.end()) return false;
    std::string_view text = it->second;
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    auto parsed = parseQuantity(text);
    if (!parsed) return false;
    auto whole = parsed->whole();
    if (!whole || *whole != amount) return false;
  }
  return observed.owned == keys;
}

struct QuotaReconciler::Metrics {
  explicit Metrics(obs::Registry& r)
      : applies(r.counter("tally_controller_quota_applies_total",
                          "Quota reconciles by target (plan-quota, project-quota, status) and result (applied, "
                          "unchanged, failed, unknown: the model could not work the quota out, nothing written).",
                          {"target", "result"})),
        converged(r.gauge("tally_controller_quota_orgs_converged",
                          "Organizations whose plan-quota, project caps and status matched the model at their last "
                          "reconcile.")
                      .with({})) {}
  obs::Family<obs::Counter>& applies;
  obs::Gauge& converged;
};

QuotaReconciler::QuotaReconciler(std::shared_ptr<runtime::Client> client, QuotaReconcilerOptions options)
    : LeaderController(std::move(client), {"quota", options.component, options.instance}),
      options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

QuotaReconciler::~QuotaReconciler() = default;

void QuotaReconciler::startTerm() {
  {
    std::lock_guard lock(mu_);
    lastProblem_.clear();
  }
  if (!cell_) return;
  auto snap = cell_->read();
  if (!snap) return;
  for (const auto& [key, org] : snap->cluster().organizations) enqueue(key);
}

void QuotaReconciler::objectChanged(model::Kind kind, const std::string& key) {
  switch (kind) {
    case model::Kind::Organization: changedOrgs_.insert(key); break;
    case model::Kind::HierarchicalResourceQuota:
    case model::Kind::ResourceQuota: changedNamespaces_.insert(key.substr(0, key.find('/'))); break;
    case model::Kind::BillingPlans:
    case model::Kind::DeviceClass:
    case model::Kind::Ledger:
    case model::Kind::Namespace: wakeAll_ = true; break;
    default: break;
  }
}

void QuotaReconciler::published(const state::Snapshot& snapshot) {
  if (changedOrgs_.empty() && changedNamespaces_.empty() && !wakeAll_) return;
  const model::Cluster& cluster = snapshot.cluster();
  for (const auto& key : changedOrgs_) enqueue(key);
  // A quota changed: its namespace's organization (plan-quota), or the
  // organization of a project cap's record (project-quota). Either way an
  // organization whose namespace is the quota's, or all of them for a project.
  for (const auto& [key, org] : cluster.organizations) {
    if (wakeAll_ || changedNamespaces_.contains(org.ns)) {
      enqueue(key);
      continue;
    }
    for (const auto& r : cluster.ledger.records) {
      if (r.organization == org.name && changedNamespaces_.contains(r.project)) {
        enqueue(key);
        break;
      }
    }
  }
  changedOrgs_.clear();
  changedNamespaces_.clear();
  wakeAll_ = false;
}

void QuotaReconciler::count(std::string_view target, Outcome outcome) {
  if (!metrics_) return;
  std::string_view result = outcome == Outcome::Applied     ? "applied"
                            : outcome == Outcome::Unchanged ? "unchanged"
                            : outcome == Outcome::Failed    ? "failed"
                                                            : "unknown";
  metrics_->applies.with({target, result}).inc();
}

void QuotaReconciler::setConverged(const std::string& key, bool converged) {
  std::lock_guard lock(mu_);
  converged_[key] = converged;
  if (metrics_) {
    metrics_->converged.set(
        static_cast<double>(std::count_if(converged_.begin(), converged_.end(), [](auto& e) { return e.second; })));
  }
}

void QuotaReconciler::event(const model::Organization& org, const std::string& type, const std::string& reason,
                            const std::string& message) {
  const std::string key = model::objectKey(org.ns, org.name);
  if (reason == "QuotaApplyFailed") {
    std::lock_guard lock(mu_);
    auto& last = lastProblem_[key];
    if (last == message) return;  // said already; the metric keeps counting
    last = message;
  } else {
    std::lock_guard lock(mu_);
    lastProblem_.erase(key);
  }
  LeaderController::event({"kube-dc.com/v1", "Organization", org.ns, org.name, ""}, type, reason, message);
}

QuotaReconciler::Outcome QuotaReconciler::reconcilePlanQuota(const model::Cluster& cluster,
                                                             const model::Organization& org, std::string& error) {
  const model::PlanQuota desired = model::desiredPlanQuota(cluster, org);
  if (!desired.known()) {
    error = fmt::format("hrq {}/{} left as it is: {}", org.ns, model::kOrgQuotaName, joined(desired.unknown));
    count("plan-quota", Outcome::Unknown);
    return Outcome::Unknown;
  }
  const auto res = kHrqs.inNamespace(org.ns);
  ObservedQuota observed;
  if (auto got = client_->get(res, model::kOrgQuotaName); got) {
    auto read = observeQuota(*got, options_.fieldManager);
    if (!read) {
      error = fmt::format("hrq {}/{}: {}", org.ns, model::kOrgQuotaName, unreadable(read.error()));
      count("plan-quota", Outcome::Failed);
      return Outcome::Failed;
    }
    observed = std::move(read).value();
  } else if (!got.error().is(runtime::ErrorCode::kNotFound)) {
    error = fmt::format("read hrq {}/{}: {}", org.ns, model::kOrgQuotaName, got.error().describe());
    count("plan-quota", Outcome::Failed);
    return Outcome::Failed;
  }
  if (quotaConverged(observed, desired.hard)) {
    count("plan-quota", Outcome::Unchanged);
    return Outcome::Unchanged;
  }
  runtime::PatchOptions po{options_.fieldManager, true, "", false};
  if (auto st =
          client_->patch(res, model::kOrgQuotaName, runtime::PatchType::kApply, hrqApplyBody(org.ns, desired.hard), po);
      !st) {
    error = fmt::format("apply hrq {}/{}: {}", org.ns, model::kOrgQuotaName, st.error().describe());
    count("plan-quota", Outcome::Failed);
    return Outcome::Failed;
  }
  count("plan-quota", Outcome::Applied);
  const std::string message = fmt::format("hrq {}/{} {}: {}", org.ns, model::kOrgQuotaName,
                                          observed.exists ? "updated" : "created", describe(desired.hard));
  logInfo("quota: plan-quota applied", {{"organization", org.ns + "/" + org.name}, {"hard", describe(desired.hard)}});
  event(org, "Normal", "QuotaApplied", message);
  return Outcome::Applied;
}

QuotaReconciler::Outcome QuotaReconciler::reconcileProjectCaps(const model::Cluster& cluster,
                                                               const model::Organization& org, std::string& error) {
  Outcome result = Outcome::Unchanged;
  for (const auto& cap : model::projectCaps(cluster)) {
    const bool ours = std::any_of(cluster.ledger.records.begin(), cluster.ledger.records.end(),
                                  [&](const auto& r) { return r.organization == org.name && r.project == cap.ns; });
    if (!ours) continue;
    const auto res = kResourceQuotas.inNamespace(cap.ns);
    ObservedQuota observed;
    if (auto got = client_->get(res, model::kProjectQuotaName); got) {
      auto read = observeQuota(*got, options_.fieldManager);
      if (!read) {
        error = fmt::format("resourcequota {}/{}: {}", cap.ns, model::kProjectQuotaName, unreadable(read.error()));
        count("project-quota", Outcome::Failed);
        return Outcome::Failed;
      }
      observed = std::move(read).value();
    } else if (!got.error().is(runtime::ErrorCode::kNotFound)) {
      error = fmt::format("read resourcequota {}/{}: {}", cap.ns, model::kProjectQuotaName, got.error().describe());
      count("project-quota", Outcome::Failed);
      return Outcome::Failed;
    }
    // Nothing to cap and nothing of Tally's there: no object is created for it.
    if (quotaConverged(observed, cap.hard) || (cap.hard.empty() && observed.owned.empty())) {
      count("project-quota", Outcome::Unchanged);
      continue;
    }
    runtime::PatchOptions po{options_.fieldManager, true, "", false};
    if (auto st = client_->patch(res, model::kProjectQuotaName, runtime::PatchType::kApply,
                                 resourceQuotaApplyBody(cap.ns, cap.hard), po);
        !st) {
      error = fmt::format("apply resourcequota {}/{}: {}", cap.ns, model::kProjectQuotaName, st.error().describe());
      count("project-quota", Outcome::Failed);
      return Outcome::Failed;
    }
    count("project-quota", Outcome::Applied);
    std::string records;
    for (const auto& id : cap.records) records += (records.empty() ? "" : ", ") + id;
    event(org, "Normal", "QuotaApplied",
          cap.hard.empty()
              ? fmt::format("resourcequota {}/{}: reservation cap removed (records {} released or canceled)", cap.ns,
                            model::kProjectQuotaName, records)
              : fmt::format("resourcequota {}/{}: project cap {} (records {})", cap.ns, model::kProjectQuotaName,
                            describe(cap.hard), records));
    result = Outcome::Applied;
  }
  return result;
}

QuotaReconciler::Outcome QuotaReconciler::reconcileStatus(const model::Cluster& cluster, const model::Organization& org,
                                                          std::string& error) {
  auto desired = model::acceleratorStatus(cluster, org);
  if (!desired) {
    count("status", Outcome::Unknown);
    return Outcome::Unknown;  // HNC has reported nothing yet: nothing to say
  }
  if (*desired == org.acceleratorStatus) {
    count("status", Outcome::Unchanged);
    return Outcome::Unchanged;
  }
  runtime::PatchOptions po{options_.fieldManager, false, "status", false};
  if (auto st = client_->patch(kOrganizations.inNamespace(org.ns), org.name, runtime::PatchType::kMerge,
                               acceleratorStatusPatch(org.acceleratorStatus, *desired), po);
      !st) {
    error = fmt::format("status of organization {}/{}: {}", org.ns, org.name, st.error().describe());
    count("status", Outcome::Failed);
    return Outcome::Failed;
  }
  count("status", Outcome::Applied);
  return Outcome::Applied;
}

runtime::Result<ReconcileResult> QuotaReconciler::reconcile(const std::string& key, std::stop_token) {
  if (!cell_) return runtime::Error(runtime::ErrorCode::kInternal, "quota reconciler reads no snapshots");
  auto snap = cell_->read();
  const model::Cluster& cluster = snap->cluster();
  auto it = cluster.organizations.find(key);
  if (it == cluster.organizations.end()) {
    std::lock_guard lock(mu_);
    converged_.erase(key);
    lastProblem_.erase(key);
    if (metrics_) {
      metrics_->converged.set(
          static_cast<double>(std::count_if(converged_.begin(), converged_.end(), [](auto& e) { return e.second; })));
    }
    return ReconcileResult::done();
  }
  const model::Organization& org = it->second;
  if (!snap->ready()) return ReconcileResult::requeueAfter(std::chrono::seconds(1));

  std::string quotaError, capError, statusError;
  const Outcome quota = reconcilePlanQuota(cluster, org, quotaError);
  const Outcome caps = reconcileProjectCaps(cluster, org, capError);
  const Outcome status = reconcileStatus(cluster, org, statusError);
  std::vector<std::string> problems;
  for (const auto* e : {&quotaError, &capError, &statusError}) {
    if (!e->empty()) problems.push_back(*e);
  }
  if (!problems.empty()) {
    event(org, "Warning", "QuotaApplyFailed", joined(problems));
    logWarning("quota: not converged", {{"organization", key}, {"problem", joined(problems)}});
  }
  // Converged: what the model says is what the API server holds (a write
  // just made counts once its watch shows it, at the next reconcile).
  setConverged(key, quota == Outcome::Unchanged && caps == Outcome::Unchanged && status == Outcome::Unchanged);
  if (quota == Outcome::Failed || caps == Outcome::Failed || status == Outcome::Failed) {
    return runtime::Error(runtime::ErrorCode::kInternal, joined(problems));
  }
  return ReconcileResult::requeueAfter(options_.resync);
}

}  // namespace tally::controller
