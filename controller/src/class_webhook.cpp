#include "tally/controller/class_webhook.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "refusals.hpp"
#include "tally/controller/pool_auditor.hpp"
#include "tally/runtime/access_review.hpp"

namespace tally::controller {

using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::Operation;

std::string acknowledgementVerb(std::string_view role) { return "acknowledge-" + std::string(role); }

RoleCheck SubjectAccessRoles::check(const runtime::admission::UserInfo& user, std::string_view role,
                                    std::string_view pool) {
  using Outcome = runtime::AccessAnswer::Outcome;
  const runtime::AccessAnswer answer = runtime::reviewSubjectAccess(
      *client_, {user.username, user.uid, user.groups, user.extraJson},
      {"", acknowledgementVerb(role), "gpu.tally.dev", "gpudeviceclasses", std::string(pool)});
  switch (answer.outcome) {
    case Outcome::Allowed: return {RoleCheck::Verdict::Allowed, ""};
    case Outcome::Denied: return {RoleCheck::Verdict::Denied, answer.detail};
    case Outcome::Failed: return {RoleCheck::Verdict::Unknown, "SubjectAccessReview failed: " + answer.detail};
    case Outcome::Unreadable: return {RoleCheck::Verdict::Unknown, "the SubjectAccessReview answer cannot be read"};
  }
  return {};
}

AdmissionResponse reviewDeviceClass(const AdmissionRequest& request, AcknowledgementRoles& roles) {
  if (request.operation != Operation::kUpdate || !request.subResource.empty()) return AdmissionResponse::allow();
  const std::string name = request.name;
  auto before = decodeAcknowledgements(std::string_view(request.oldObject.data(), request.oldObject.size()));
  auto after = decodeAcknowledgements(std::string_view(request.object.data(), request.object.size()));
  if (!before) return invalid("GPUDeviceClass " + name + " (before the update): " + before.error().message);
  if (!after) return invalid("GPUDeviceClass " + name + ": " + after.error().message);
  auto status = decodePoolStatus(std::string_view(request.oldObject.data(), request.oldObject.size()));
  if (!status) return invalid("GPUDeviceClass " + name + " (before the update): " + status.error().message);
  const std::string& current = status->gateFailureId;
  const std::string& user = request.userInfo.username;
  std::vector<const Acknowledgement*> added;
  for (const Acknowledgement& a : *after) {
    const bool unchanged = std::find(before->begin(), before->end(), a) != before->end();
    if (unchanged) continue;
    const std::string what = fmt::format("acknowledgement of failure {} as {} by {}", a.failureId, a.role, a.identity);
    if (a.identity != user) {
      return forbidden(
          fmt::format("[AckIdentityMismatch] GPUDeviceClass {}: {} is refused: an identity "
                      "acknowledges only for itself, and this request is made by {}",
                      name, what, user.empty() ? "an unnamed user" : user));
    }
    if (std::find(std::begin(kAcknowledgementRoles), std::end(kAcknowledgementRoles), a.role) ==
        std::end(kAcknowledgementRoles)) {
      return forbidden(
          fmt::format("[AckUnknownRole] GPUDeviceClass {}: {} is refused: the roles of the review are product "
                      "and sre",
                      name, what));
    }
    if (current.empty()) {
      return forbidden(
          fmt::format("[AckNoFailure] GPUDeviceClass {}: {} is refused: the pool has no audit failure "
                      "to acknowledge (status.gateFailureId is empty)",
                      name, what));
    }
    if (a.failureId != current) {
      return forbidden(
          fmt::format("[AckWrongFailure] GPUDeviceClass {}: {} is refused: the pool's current failure "
                      "is {} (status.gateFailureId)",
                      name, what, current));
    }
    for (const Acknowledgement& other : *after) {
      if (other.failureId == a.failureId && other.identity == a.identity && other.role != a.role) {
        return forbidden(
            fmt::format("[AckTwice] GPUDeviceClass {}: {} is refused: {} acknowledged failure {} as {} "
                        "already; product and sre must be two different people",
                        name, what, a.identity, a.failureId, other.role));
      }
    }
    added.push_back(&a);
  }
  // Who holds a role is asked last, once the acknowledgement is otherwise sound.
  for (const Acknowledgement* a : added) {
    const RoleCheck held = roles.check(request.userInfo, a->role, name);
    if (held.verdict == RoleCheck::Verdict::Allowed) continue;
    const std::string what =
        fmt::format("acknowledgement of failure {} as {} by {}", a->failureId, a->role, a->identity);
    if (held.verdict == RoleCheck::Verdict::Denied) {
      return forbidden(fmt::format(
          "[AckRoleNotAuthorised] GPUDeviceClass {}: {} is refused: user {} is not authorised for the {} role "
          "(verb {} on gpudeviceclasses.gpu.tally.dev {}, granted by ClusterRole tally-gate-acknowledger-{}){}",
          name, what, user, a->role, acknowledgementVerb(a->role), name, a->role,
          held.reason.empty() ? "" : ": " + held.reason));
    }
    return forbidden(
        fmt::format("[AckRoleUnverified] GPUDeviceClass {}: {} is refused: whether user {} holds the {} role cannot be "
                    "checked ({}); retry",
                    name, what, user, a->role, held.reason));
  }
  return AdmissionResponse::allow();
}

runtime::admission::WebhookHandler classWebhook(AcknowledgementRoles& roles) {
  return [&roles](const AdmissionRequest& request) { return reviewDeviceClass(request, roles); };
}

}  // namespace tally::controller
