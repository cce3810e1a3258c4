#pragma once
// The ResourceClaim validating webhook (SPEC 3.7, the claim door): a CREATE is
// an order of DRA devices the model checks on this replica's snapshot
// (model::checkClaimAtCreate): budgets of the claim's namespace and its
// ancestors, the pools' gates, free units and one node with room, refused
// closed while a cache has not synced. kube-controller-manager creates the
// claims of a pod's templates, so the claim's namespace decides, never the
// requester. The webhook writes nothing to the API server: a dry run gets the
// same answer and leaves no trace.
//
// What it admitted is held in flight until a published snapshot holds the
// claim (the writer tells it as an observer: the claim's event, then the
// publication), so claims created at once cannot each spend the same last
// unit; an admission the API server never stored (another webhook refused
// it) stops counting after kFlightSeconds. Each decision reads the newest
// snapshot under the same lock the publication takes, so no claim is counted
// neither in flight nor in the snapshot.

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tally/common/snapshot_cell.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/state/extension.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::controller {

inline constexpr std::string_view kClaimWebhookPath = "/validate/resourceclaims";
inline constexpr std::string_view kClaimWebhookName = "resourceclaims";

class ClaimWebhook final : public state::Observer {
 public:
  // How long an admitted claim no snapshot holds yet counts in flight.
  static constexpr std::chrono::seconds kFlightSeconds{30};

  ClaimWebhook() = default;
  explicit ClaimWebhook(const SnapshotCell<state::Snapshot>& cell) : cell_(&cell) {}
  // The snapshots the reviews decide on (the writer's cell, once it exists).
  void readFrom(const SnapshotCell<state::Snapshot>& cell) { cell_ = &cell; }

  // The answer to one review at `now`, on the newest snapshot.
  runtime::admission::Answer review(const runtime::admission::AdmissionRequest& request,
                                    std::chrono::steady_clock::time_point now);
  runtime::admission::Validator handler();
  std::size_t inFlight() const;

  // state::Observer (the writer's thread).
  void objectChanged(model::Kind kind, const std::string& key) override;
  void published(const state::Snapshot& snapshot) override;

 private:
  struct Flight {
    model::ResourceClaim claim;
    std::chrono::steady_clock::time_point until;
    bool delivered = false;  // its event applied: the next publication holds it
  };
  runtime::admission::Answer decide(const state::Snapshot& snapshot,
                                    const runtime::admission::AdmissionRequest& request,
                                    std::chrono::steady_clock::time_point now);

  const SnapshotCell<state::Snapshot>* cell_ = nullptr;
  mutable std::mutex mu_;  // one decision at a time: each sees the ones before it
  std::vector<Flight> flights_;
};

}  // namespace tally::controller
