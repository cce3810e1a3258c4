#include "tally/controller/organization_webhook.hpp"

#include <fmt/format.h>

#include <future>
#include <memory>

#include "refusals.hpp"
#include "tally/codec/admission_objects.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/index.hpp"

namespace tally::controller {
namespace {

using detail::describe;
using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::Operation;

struct Answer {
  AdmissionResponse response;
  std::vector<std::string> codes;
};

Answer refusedWith(AdmissionResponse response, std::string code) { return {std::move(response), {std::move(code)}}; }

struct Decoded {
  model::Organization org;
  std::string error;
};

Decoded decodeOrganization(const simdjson::padded_string& json, const AdmissionRequest& request, const char* which) {
  auto decoded = codec::decodeAdmittedOrganization(json, request.namespace_, request.name, which);
  return {std::move(decoded.value), std::move(decoded.error)};
}

Answer decide(const model::Cluster& cluster, const model::CapacityView& view, const AdmissionRequest& request) {
  if (request.kind.group != "kube-dc.com" || request.kind.kind != "Organization") {
    return refusedWith(
        invalid("this webhook reviews kube-dc.com Organizations, not " + request.kind.group + "/" + request.kind.kind),
        "WrongKind");
  }
  const bool create = request.operation == Operation::kCreate;
  if ((!create && request.operation != Operation::kUpdate) || !request.subResource.empty()) {
    return {AdmissionResponse::allow(), {}};
  }
  Decoded after = decodeOrganization(request.object, request, create ? "new" : "updated");
  if (!after.error.empty()) return refusedWith(invalid(after.error), "Unreadable");
  Decoded before;
  if (create) {
    before.org = model::Organization{after.org.ns, after.org.name, {}, {}};
  } else {
    before = decodeOrganization(request.oldObject, request, "current");
    if (!before.error.empty()) return refusedWith(invalid(before.error), "Unreadable");
  }
  if (before.org.addons == after.org.addons) return {AdmissionResponse::allow(), {}};
  const std::string subject = "organization " + after.org.ns + "/" + after.org.name;
  for (model::Kind kind :
       {model::Kind::Organization, model::Kind::HierarchicalResourceQuota, model::Kind::BillingPlans,
        model::Kind::DeviceClass, model::Kind::Pod, model::Kind::GpuDevice, model::Kind::Node, model::Kind::Ledger}) {
    if (!cluster.synced(kind)) {
      return refusedWith(forbidden(fmt::format("[CacheNotSynced] {}: the add-on change cannot be checked, the {} "
                                               "cache is not synced yet (this replica is still starting)",
                                               subject, model::toString(kind))),
                         std::string(model::toString(model::Code::CacheNotSynced)));
    }
  }
  if (!create && !cluster.organizations.contains(model::objectKey(after.org.ns, after.org.name))) {
    // The pool equations read the organization from the cache: one it has not
    // seen yet cannot be evaluated (a new one is evaluated as one holding nothing).
    return refusedWith(forbidden(fmt::format("[CacheNotSynced] {}: this replica has not seen the organization yet, "
                                             "so the add-on change cannot be checked; retry",
                                             subject)),
                       std::string(model::toString(model::Code::CacheNotSynced)));
  }
  model::Decision decision = create ? model::checkOrganizationCreate(cluster, view, after.org)
                                    : model::checkAddonChange(cluster, view, before.org, after.org);
  if (decision.allowed()) return {AdmissionResponse::allow(), {}};
  Answer a{forbidden(describe(decision)), {}};
  for (const auto& r : decision.refusals) a.codes.emplace_back(model::toString(r.code));
  return a;
}

void countRefusals(const Answer& answer, const OrganizationWebhookOptions& options) {
  if (!options.refusals) return;
  for (const auto& code : answer.codes) options.refusals->with({code}).inc();
}

}  // namespace

observability::Family<observability::Counter>& organizationRefusalMetric(observability::Registry& registry) {
  return registry.counter("tally_controller_organization_refusals_total",
                          "Organization add-on changes refused, by reason code.", {"code"});
}

AdmissionResponse reviewOrganization(const model::Cluster& cluster, const model::CapacityView& view,
                                     const AdmissionRequest& request, const OrganizationWebhookOptions& options) {
  Answer answer = decide(cluster, view, request);
  countRefusals(answer, options);
  return std::move(answer.response);
}

runtime::admission::WebhookHandler organizationWebhook(const SnapshotCell<state::Snapshot>& cell, state::Writer& writer,
                                                       OrganizationWebhookOptions options) {
  return [&cell, &writer, options = std::move(options)](const AdmissionRequest& request) -> AdmissionResponse {
    {
      auto snapshot = cell.read();
      if (!snapshot->ready()) {
        Answer a = refusedWith(
            forbidden(fmt::format("[CacheNotSynced] organization {}/{}: {}, so the add-on change cannot be checked "
                                  "(this replica is still starting)",
                                  request.namespace_, request.name, snapshot->unsyncedCaches())),
            std::string(model::toString(model::Code::CacheNotSynced)));
        countRefusals(a, options);
        return std::move(a.response);
      }
    }
    // The request outlives neither this call nor the task: the task gets its
    // own copy, and a late task answers a promise nobody waits on.
    auto copy = std::make_shared<AdmissionRequest>();
    copy->uid = request.uid;
    copy->kind = request.kind;
    copy->resource = request.resource;
    copy->subResource = request.subResource;
    copy->name = request.name;
    copy->namespace_ = request.namespace_;
    copy->operation = request.operation;
    copy->userInfo = request.userInfo;
    copy->dryRun = request.dryRun;
    copy->object = simdjson::padded_string(std::string_view(request.object.data(), request.object.size()));
    copy->oldObject = simdjson::padded_string(std::string_view(request.oldObject.data(), request.oldObject.size()));
    auto answer = std::make_shared<std::promise<AdmissionResponse>>();
    std::future<AdmissionResponse> decided = answer->get_future();
    writer.post(
        [copy, answer, options](model::UsageIndex& index) {
          // Counted here, once, by the side that decided.
          answer->set_value(reviewOrganization(index.cluster(), index, *copy, options));
        },
        false);
    if (decided.wait_for(options.decisionTimeout) != std::future_status::ready) {
      Answer a = refusedWith(
          forbidden(fmt::format("[DecisionTimeout] organization {}/{}: the add-on change was not decided within {} ms "
                                "(the state writer is busy); retry",
                                request.namespace_, request.name, options.decisionTimeout.count())),
          "DecisionTimeout");
      countRefusals(a, options);
      return std::move(a.response);
    }
    return decided.get();
  };
}

}  // namespace tally::controller
