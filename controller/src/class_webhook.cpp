#include "tally/controller/class_webhook.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "refusals.hpp"
#include "tally/codec/pool_status.hpp"
#include "tally/runtime/access_review.hpp"

namespace tally::controller {
namespace {

using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::Answer;
using runtime::admission::Operation;

template <class Json>
std::string_view textOf(const Json& json) {
  return std::string_view(json.data(), json.size());
}

std::string describeAck(const Acknowledgement& a) {
  return fmt::format("acknowledgement of failure {} as {} by {}", a.failureId, a.role, a.identity);
}

// Why a new or changed acknowledgement is refused before anyone is asked who
// holds its role; nullopt when it is sound.
std::optional<Answer> unsoundAck(const Acknowledgement& a, const std::vector<Acknowledgement>& after,
                                 const std::string& name, const std::string& current, const std::string& user) {
  const std::string what = describeAck(a);
  if (a.identity != user) {
    return forbidden("AckIdentityMismatch",
                     fmt::format("[AckIdentityMismatch] GPUDeviceClass {}: {} is refused: an identity "
                                 "acknowledges only for itself, and this request is made by {}",
                                 name, what, user.empty() ? "an unnamed user" : user));
  }
  if (std::find(std::begin(kAcknowledgementRoles), std::end(kAcknowledgementRoles), a.role) ==
      std::end(kAcknowledgementRoles)) {
    return forbidden("AckUnknownRole",
                     fmt::format("[AckUnknownRole] GPUDeviceClass {}: {} is refused: the roles of the review are "
                                 "product and sre",
                                 name, what));
  }
  if (current.empty()) {
    return forbidden("AckNoFailure", fmt::format("[AckNoFailure] GPUDeviceClass {}: {} is refused: the pool has no "
                                                 "audit failure to acknowledge (status.gateFailureId is empty)",
                                                 name, what));
  }
  if (a.failureId != current) {
    return forbidden("AckWrongFailure", fmt::format("[AckWrongFailure] GPUDeviceClass {}: {} is refused: the pool's "
                                                    "current failure is {} (status.gateFailureId)",
                                                    name, what, current));
  }
  for (const Acknowledgement& other : after) {
    if (other.failureId == a.failureId && other.identity == a.identity && other.role != a.role) {
      return forbidden("AckTwice", fmt::format("[AckTwice] GPUDeviceClass {}: {} is refused: {} acknowledged failure "
                                               "{} as {} already; product and sre must be two different people",
                                               name, what, a.identity, a.failureId, other.role));
    }
  }
  return std::nullopt;
}

// Why the user may not make acknowledgement `a` in its role; nullopt when it may.
std::optional<Answer> unauthorisedAck(const Acknowledgement& a, const AdmissionRequest& request,
                                      AcknowledgementRoles& roles) {
  const std::string& name = request.name;
  const std::string& user = request.userInfo.username;
  const RoleCheck held = roles.check(request.userInfo, a.role, name);
  if (held.verdict == RoleCheck::Verdict::Allowed) return std::nullopt;
  const std::string what = describeAck(a);
  if (held.verdict == RoleCheck::Verdict::Denied) {
    return forbidden(
        "AckRoleNotAuthorised",
        fmt::format("[AckRoleNotAuthorised] GPUDeviceClass {}: {} is refused: user {} is not authorised for the {} "
                    "role (verb {} on gpudeviceclasses.gpu.tally.dev {}, granted by ClusterRole "
                    "tally-gate-acknowledger-{}){}",
                    name, what, user, a.role, acknowledgementVerb(a.role), name, a.role,
                    held.reason.empty() ? "" : ": " + held.reason));
  }
  return forbidden("AckRoleUnverified",
                   fmt::format("[AckRoleUnverified] GPUDeviceClass {}: {} is refused: whether user {} holds the {} "
                               "role cannot be checked ({}); retry",
                               name, what, user, a.role, held.reason));
}

}  // namespace

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

Answer reviewDeviceClass(const AdmissionRequest& request, AcknowledgementRoles& roles) {
  if (request.operation != Operation::kUpdate || !request.subResource.empty()) return Answer::allow();
  const std::string& name = request.name;
  auto before = decodeAcknowledgements(textOf(request.oldObject));
  auto after = decodeAcknowledgements(textOf(request.object));
  if (!before)
    return invalid("Unreadable", "GPUDeviceClass " + name + " (before the update): " + before.error().message);
  if (!after) return invalid("Unreadable", "GPUDeviceClass " + name + ": " + after.error().message);
  auto status = codec::decodePoolStatus(textOf(request.oldObject));
  if (!status)
    return invalid("Unreadable", "GPUDeviceClass " + name + " (before the update): " + status.error().message);
  std::vector<const Acknowledgement*> added;
  for (const Acknowledgement& a : *after) {
    if (std::find(before->begin(), before->end(), a) != before->end()) continue;
    if (auto refused = unsoundAck(a, *after, name, status->gateFailureId, request.userInfo.username)) {
      return std::move(*refused);
    }
    added.push_back(&a);
  }
  // Who holds a role is asked last, once the acknowledgement is otherwise sound.
  for (const Acknowledgement* a : added) {
    if (auto refused = unauthorisedAck(*a, request, roles)) return std::move(*refused);
  }
  return Answer::allow();
}

runtime::admission::Validator classWebhook(AcknowledgementRoles& roles) {
  return {[&roles](const AdmissionRequest& request) { return reviewDeviceClass(request, roles); }};
}

}  // namespace tally::controller
