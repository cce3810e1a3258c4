#pragma once
// The Organization validating webhook (SPEC 3.6 "Add-on reduction"; CREATE
// and UPDATE, /validate/organizations): model::checkAddonChange decides an
// UPDATE, model::checkOrganizationCreate a CREATE with add-ons (the same
// question from an organization holding nothing). A reduction is refused
// while HNC's usage or the holders the model counts (pods, VMIs' held
// devices) exceed the new hard quota, naming the holders, and while a
// reservation add-on still backs a pending or active ledger record; an increase is
// refused when it would break the pool's invariant, while a failed audit
// closes the pool, or while another reservation transaction is in flight
// there (a pending record admits exactly its own grant).
//
// Holders are named from pods, and a snapshot holds none: the decision runs
// on the state writer's thread (Writer::post) on the live cluster and usage
// index, and comes back through a promise; not back within the decision
// timeout, the change is refused closed. The webhook writes nothing, so a dry
// run is answered the same. Refusals are counted by the frame:
// tally_webhook_refusals_total{webhook="organizations",operation,code}.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "tally/common/snapshot_cell.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/state/extension.hpp"
#include "tally/state/snapshot.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

inline constexpr std::string_view kOrganizationWebhookPath = "/validate/organizations";
inline constexpr std::string_view kOrganizationWebhookName = "organizations";

struct OrganizationWebhookOptions {
  // How long a review waits for the writer thread's decision before it is
  // refused closed (keep the configuration's timeoutSeconds above it).
  std::chrono::milliseconds decisionTimeout{3'000};
  // How long an answer that only waits on this replica's caches (an unknown
  // pool equation, an organization not seen yet) is decided again, each time
  // an object changes in them, before it is returned: the usual cause is a
  // cache a few events behind the API server, such as the plan-quota HRQ the
  // quota reconciler created a moment ago. 0 answers the first decision.
  std::chrono::milliseconds settle{2'000};
};

// The answer to one review, decided on a cluster that holds its pods (the
// writer's live cluster) and the usage over it.
runtime::admission::Answer reviewOrganization(const model::Cluster& cluster, const model::CapacityView& view,
                                              const runtime::admission::AdmissionRequest& request,
                                              const OrganizationWebhookOptions& options);

// Wakes the reviews whose answer waits on the caches when an object other
// than a pod changes in them (pods hold no answer to an unknown equation):
// registered as one of the writer's observers.
class CacheChanges final : public state::Observer {
 public:
  // Changes applied so far.
  std::uint64_t count() const;
  // Waits until more than `seen` changes were applied or `until` passes (or
  // the writer stopped); whether there were.
  bool waitPast(std::uint64_t seen, std::chrono::steady_clock::time_point until) const;

  void objectChanged(model::Kind kind, const std::string& key) override;
  void stopped() override;

 private:
  void changed();
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::uint64_t changes_ = 0;
  bool stopped_ = false;
};

// The route's validator: refused closed while `cell`'s newest snapshot has
// not synced; otherwise decided on `writer`'s thread, and again after each
// change `changes` sees while the answer is unknown, for up to
// `options.settle`.
runtime::admission::Validator organizationWebhook(const SnapshotCell<state::Snapshot>& cell, state::Writer& writer,
                                                  const CacheChanges& changes, OrganizationWebhookOptions options);

}  // namespace tally::controller
