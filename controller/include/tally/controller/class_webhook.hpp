#pragma once
// The GPUDeviceClass validating webhook (SPEC 3.5): acknowledgements of an
// audit failure (spec.gateAcknowledgements). On an UPDATE, every new or changed
// acknowledgement must name the requesting user as its identity, the failure id
// the class's status publishes now (status.gateFailureId), a role of the
// two-person review (product or sre) that the user is authorised for, and an
// identity that has not acknowledged the same failure in the other role: one
// person cannot stand for both product and sre. Removing an acknowledgement is
// allowed. The webhook reads the review and asks who holds a role (a
// SubjectAccessReview per new acknowledgement); it writes nothing.
//
// A role is authorised by RBAC: the verb acknowledge-<role> on
// gpudeviceclasses.gpu.tally.dev (the class's name, or all of them), granted by
// the ClusterRoles tally-gate-acknowledger-product and -sre. A role that cannot
// be checked (the API server does not answer) is refused closed.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tally/codec/admission_objects.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/runtime/client.hpp"

namespace tally::controller {

inline constexpr std::string_view kClassWebhookPath = "/validate/gpudeviceclasses";
inline constexpr std::string_view kClassWebhookName = "gpudeviceclasses";

// spec.gateAcknowledgements of a GPUDeviceClass object (JSON) and its reader
// (codec/admission_objects.hpp); an error names what cannot be read.
using codec::Acknowledgement;
using codec::decodeAcknowledgements;

// The roles of the two-person review, and the RBAC verb that authorises each.
inline constexpr std::string_view kAcknowledgementRoles[] = {"product", "sre"};
std::string acknowledgementVerb(std::string_view role);  // "acknowledge-product"

// Whether a user holds a role of the review for one pool.
struct RoleCheck {
  enum class Verdict { Allowed, Denied, Unknown };
  Verdict verdict = Verdict::Unknown;
  std::string reason;  // why not (the authorizer's reason, or why it could not be asked)
};

class AcknowledgementRoles {
 public:
  virtual ~AcknowledgementRoles() = default;
  virtual RoleCheck check(const runtime::admission::UserInfo& user, std::string_view role, std::string_view pool) = 0;
};

// A SubjectAccessReview for the requesting user (name, uid, groups, extra as
// the API server authenticated them): verb acknowledgementVerb(role) on
// gpudeviceclasses.gpu.tally.dev named `pool`.
class SubjectAccessRoles final : public AcknowledgementRoles {
 public:
  explicit SubjectAccessRoles(std::shared_ptr<runtime::Client> client) : client_(std::move(client)) {}
  RoleCheck check(const runtime::admission::UserInfo& user, std::string_view role, std::string_view pool) override;

 private:
  std::shared_ptr<runtime::Client> client_;
};

// Refusal codes: Unreadable, AckIdentityMismatch, AckUnknownRole, AckNoFailure,
// AckWrongFailure, AckTwice, AckRoleNotAuthorised, AckRoleUnverified.
runtime::admission::Answer reviewDeviceClass(const runtime::admission::AdmissionRequest& request,
                                             AcknowledgementRoles& roles);

// The route's validator; `roles` outlives it.
runtime::admission::Validator classWebhook(AcknowledgementRoles& roles);

}  // namespace tally::controller
