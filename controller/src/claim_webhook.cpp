#include "tally/controller/claim_webhook.hpp"

#include <algorithm>

#include "refusals.hpp"
#include "tally/codec/admission_objects.hpp"
#include "tally/model/claim_admission.hpp"

namespace tally::controller {

using detail::answerOf;
using detail::codeName;
using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::Answer;
using runtime::admission::Operation;

Answer ClaimWebhook::review(const AdmissionRequest& request, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  auto snapshot = cell_->read();
  return decide(*snapshot, request, now);
}

void ClaimWebhook::objectChanged(model::Kind kind, const std::string& key) {
  if (kind != model::Kind::ResourceClaim) return;
  std::lock_guard lock(mu_);
  for (auto& f : flights_) {
    if (model::objectKey(f.claim.ns, f.claim.name) == key) f.delivered = true;
  }
}

void ClaimWebhook::published(const state::Snapshot&) {
  std::lock_guard lock(mu_);
  std::erase_if(flights_, [](const Flight& f) { return f.delivered; });
}

Answer ClaimWebhook::decide(const state::Snapshot& snapshot, const AdmissionRequest& request,
                            std::chrono::steady_clock::time_point now) {
  if (request.kind.group != "resource.k8s.io" || request.kind.kind != "ResourceClaim") {
    return invalid("WrongKind", "this webhook reviews resource.k8s.io ResourceClaims, not " + request.kind.group + "/" +
                                    request.kind.kind);
  }
  // A claim's spec is immutable and its status the allocator's: only a CREATE
  // asks for devices.
  if (request.operation != Operation::kCreate) return Answer::allow();
  auto created = codec::decodeAdmittedResourceClaim(request.object, request.namespace_, request.name);
  if (!created.error.empty()) return invalid("Unreadable", created.error);
  const model::ResourceClaim& claim = created.value;
  const std::string subject =
      "resourceclaim/" + claim.ns + "/" + (claim.name.empty() ? std::string("(generated name)") : claim.name);
  if (!snapshot.ready()) {
    return forbidden(codeName(model::Code::CacheNotSynced),
                     "[CacheNotSynced] " + subject + " refused: " + snapshot.unsyncedCaches() +
                         ", so the claim cannot be checked (this replica is still starting)");
  }
  const model::Cluster& cluster = snapshot.cluster();
  // Delivered flights end at the publication that holds them (published());
  // what the API server never stored ends here.
  std::erase_if(flights_, [&](const Flight& f) { return f.until <= now; });
  std::vector<model::ResourceClaim> inFlight;
  inFlight.reserve(flights_.size());
  for (const auto& f : flights_) inFlight.push_back(f.claim);
  model::Decision decision = model::checkClaimAtCreate(cluster, snapshot.usage, claim, subject, inFlight);
  if (decision.allowed() && !request.dryRun && !claim.name.empty())
    flights_.push_back({claim, now + kFlightSeconds, false});
  return answerOf(decision);
}

std::size_t ClaimWebhook::inFlight() const {
  std::lock_guard lock(mu_);
  return flights_.size();
}

runtime::admission::Validator ClaimWebhook::handler() {
  return {[this](const AdmissionRequest& request) { return review(request, std::chrono::steady_clock::now()); }};
}

}  // namespace tally::controller
