#include "tally/controller/organization_webhook.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>

#include "refusals.hpp"
#include "tally/codec/admission_objects.hpp"
#include "tally/common/log.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/index.hpp"

namespace tally::controller {
namespace {

using detail::answerOf;
using detail::codeName;
using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::Answer;
using runtime::admission::Operation;

Answer notSynced(const std::string& message) {
  return forbidden(codeName(model::Code::CacheNotSynced), "[CacheNotSynced] " + message);
}

// Whether every cache the add-on equations read has synced; nullopt: all of them.
std::optional<Answer> unsyncedCache(const model::Cluster& cluster, const std::string& subject) {
  for (model::Kind kind :
       {model::Kind::Organization, model::Kind::HierarchicalResourceQuota, model::Kind::BillingPlans,
        model::Kind::DeviceClass, model::Kind::Pod, model::Kind::GpuDevice, model::Kind::Node, model::Kind::Ledger}) {
    if (!cluster.synced(kind)) {
      return notSynced(
          fmt::format("{}: the add-on change cannot be checked, the {} cache is not synced yet (this "
                      "replica is still starting)",
                      subject, model::toString(kind)));
    }
  }
  return std::nullopt;
}

// An answer that more of the API server's events could change: every reason
// is an unknown equation or a cache that has not seen something yet.
bool waitsOnCaches(const Answer& answer) {
  if (answer.allowed() || answer.codes.empty()) return false;
  return std::ranges::all_of(answer.codes, [](const std::string& code) {
    return code == codeName(model::Code::InvariantUnknown) || code == codeName(model::Code::CacheNotSynced);
  });
}

}  // namespace

Answer reviewOrganization(const model::Cluster& cluster, const model::CapacityView& view,
                          const AdmissionRequest& request, const OrganizationWebhookOptions&) {
  if (request.kind.group != "kube-dc.com" || request.kind.kind != "Organization") {
    return invalid("WrongKind", "this webhook reviews kube-dc.com Organizations, not " + request.kind.group + "/" +
                                    request.kind.kind);
  }
  const bool create = request.operation == Operation::kCreate;
  if ((!create && request.operation != Operation::kUpdate) || !request.subResource.empty()) return Answer::allow();
  auto decode = [&](const auto& json, const char* which) {
    return codec::decodeAdmittedOrganization(json, request.namespace_, request.name, which);
  };
  auto after = decode(request.object, create ? "new" : "updated");
  if (!after.error.empty()) return invalid("Unreadable", after.error);
  codec::AdmittedObject<model::Organization> before;
  if (create) {
    before.value = model::Organization{after.value.ns, after.value.name, {}, {}};
  } else {
    before = decode(request.oldObject, "current");
    if (!before.error.empty()) return invalid("Unreadable", before.error);
  }
  if (before.value.addons == after.value.addons) return Answer::allow();
  const std::string subject = "organization " + after.value.ns + "/" + after.value.name;
  if (auto unsynced = unsyncedCache(cluster, subject)) return std::move(*unsynced);
  if (!create && !cluster.organizations.contains(model::objectKey(after.value.ns, after.value.name))) {
    // The pool equations read the organization from the cache: one it has not
    // seen yet cannot be evaluated (a new one is evaluated as one holding nothing).
    return notSynced(subject +
                     ": this replica has not seen the organization yet, so the add-on change cannot be checked; retry");
  }
  return answerOf(create ? model::checkOrganizationCreate(cluster, view, after.value)
                         : model::checkAddonChange(cluster, view, before.value, after.value));
}

std::uint64_t CacheChanges::count() const {
  std::lock_guard lock(mu_);
  return changes_;
}

bool CacheChanges::waitPast(std::uint64_t seen, std::chrono::steady_clock::time_point until) const {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, until, [&] { return changes_ > seen || stopped_; }) && !stopped_;
}

void CacheChanges::changed() {
  {
    std::lock_guard lock(mu_);
    ++changes_;
  }
  cv_.notify_all();
}

void CacheChanges::objectChanged(model::Kind, const std::string&) { changed(); }

void CacheChanges::stopped() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
}

runtime::admission::Validator organizationWebhook(const SnapshotCell<state::Snapshot>& cell, state::Writer& writer,
                                                  const CacheChanges& changes, OrganizationWebhookOptions options) {
  return {[&cell, &writer, &changes, options = std::move(options)](const AdmissionRequest& request) -> Answer {
    const std::string subject = "organization " + request.namespace_ + "/" + request.name;
    {
      auto snapshot = cell.read();
      if (!snapshot->ready()) {
        return notSynced(subject + ": " + snapshot->unsyncedCaches() +
                         ", so the add-on change cannot be checked (this replica is still starting)");
      }
    }
    // The request outlives neither this call nor the task: the task gets its
    // own copy, and a late task answers a promise nobody waits on.
    auto copy = std::make_shared<AdmissionRequest>(runtime::admission::copyRequest(request));
    const auto settled = std::chrono::steady_clock::now() + options.settle;
    for (int decisions = 1;; ++decisions) {
      // Taken before the decision: a change applied while it runs wakes the wait below.
      const std::uint64_t seen = changes.count();
      auto answer = std::make_shared<std::promise<Answer>>();
      std::future<Answer> decided = answer->get_future();
      writer.post(
          [copy, answer, options](model::UsageIndex& index) {
            answer->set_value(reviewOrganization(index.cluster(), index, *copy, options));
          },
          false);
      if (decided.wait_for(options.decisionTimeout) != std::future_status::ready) {
        return forbidden("DecisionTimeout",
                         fmt::format("[DecisionTimeout] {}: the add-on change was not decided within "
                                     "{} ms (the state writer is busy); retry",
                                     subject, options.decisionTimeout.count()));
      }
      Answer got = decided.get();
      const bool waits = waitsOnCaches(got);
      if (!waits || !changes.waitPast(seen, settled)) {
        if (decisions > 1) {
          logInfo("organization review decided again while the caches caught up",
                  {{"organization", request.namespace_ + "/" + request.name},
                   {"decisions", std::int64_t(decisions)},
                   {"allowed", got.allowed()},
                   {"stillWaiting", waits}});
        }
        return got;
      }
    }
  }};
}

}  // namespace tally::controller
