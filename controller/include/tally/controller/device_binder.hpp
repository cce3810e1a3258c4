#pragma once
// The device binder (SPEC 2.1, 3.6, 5; leader only): places each Pending
// GPUDevice on one node with the model's placement (the devices a VMI names
// in gpu.tally.dev/devices together, on one node), marks a placed one Lost
// when its node or its devices go and Bound (or Attached) again when they
// return, and records the release of a deleted one before its finalizer goes.
// It also keeps the VM door's attachments: it records the VMI's uid once the
// VMI exists, and undoes an attachment whose VMI is gone or never appeared
// within --vmi-attach-timeout (a held device is detached and stays Bound, a
// device made from a VMI's template is deleted).
//
// Decisions are made on this replica's snapshot, and every write is made on
// the object as the API server has it now: the binder reads it, decides again
// on what it read, and writes pinned to its resourceVersion; on 409 it reads
// and decides again (--binder-max-conflicts times at most). Its own placements
// count at once (model::HeldAheadView) until its watch shows them, so two
// placements in a row never take the same free units; a new leadership term
// first lists every GPUDevice from the API server, so placements a previous
// leader wrote and this replica's watch has not shown yet count too.
//
// Each change is a `Bound` condition (metav1.Condition), an Event on the
// device, and a metric: tally_controller_binder_placements_total,
// _refusals_total{code}, _conflicts_total, _lost_total, _recovered_total,
// _releases_total, _placement_seconds (creation to placement), and, read from
// the snapshot at each scrape, _pending_devices and _oldest_pending_seconds.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "tally/codec/objects.hpp"
#include "tally/controller/leader_controller.hpp"
#include "tally/model/placement.hpp"
#include "tally/model/vmi.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/conflict.hpp"

namespace tally::controller {

// Keeps a placed device until its release is recorded.
inline constexpr std::string_view kReleaseFinalizer = "gpu.tally.dev/release";
// The condition the binder keeps on every device it decided on.
inline constexpr std::string_view kBoundCondition = "Bound";

// The binder's decision for a Pending device: its VMI's set (`fresh`, the
// device as last read, in place of the snapshot's `seen`) placed by
// model::placeHeldSet on `view` (the snapshot with the placements the binder
// wrote ahead of the watch). Every place the binder decides calls this, and so
// does the differential test.
model::Placement binderPlacement(const model::Cluster& cluster, const model::HeldAheadView& view,
                                 const model::GpuDevice& seen, const model::GpuDevice& fresh);

struct DeviceBinderOptions {
  std::string component = "tally-controller";  // Events' reportingComponent
  std::string instance;                        // Events' reportingInstance: this replica
  // How soon an order that could not be placed, a Lost device, or a release a
  // running VMI blocks is looked at again (events wake them earlier).
  std::chrono::milliseconds retryInterval{5'000};
  // Reads and writes of one device on 409 before the key is requeued.
  int maxConflicts = 8;
  // How long an attachment of the VM door may wait for its VMI to appear
  // before it is undone (--vmi-attach-timeout; the VMI webhook's too).
  std::chrono::seconds attachTimeout{60};
  observability::Registry* metrics = nullptr;
  // Test seam: called with the key after each read of the device and before
  // the write decided on it (a test writes the object there to force a 409).
  std::function<void(const std::string& key)> beforeWrite;
};

// The leader-only controller "device-binder" (leader_controller.hpp; one
// worker: placements are decided one at a time).
class DeviceBinder final : public LeaderController {
 public:
  DeviceBinder(std::shared_ptr<runtime::Client> client, DeviceBinderOptions options);
  ~DeviceBinder() override;

  // One device, "namespace/name".
  runtime::Result<runtime::ReconcileResult> reconcile(const std::string& key, std::stop_token stop) override;

  // Placements written and not yet seen in the snapshot (tests).
  std::size_t heldAhead() const;

  // state::Observer: device and node changes enqueue the devices they concern.
  void objectChanged(model::Kind kind, const std::string& key) override;
  void published(const state::Snapshot& snapshot) override;

 private:
  struct Ahead {
    model::GpuDevice device;    // as the binder wrote it
    model::DevicePhase seenAs;  // its phase in the snapshot when written: kept until the snapshot moves on
  };
  struct Metrics;

  runtime::Status catchUp(const model::Cluster& cluster);
  void prune(const model::Cluster& cluster);
  model::HeldAheadView aheadView(const state::Snapshot& snapshot) const;
  struct Round;
  using Step = runtime::Result<runtime::Pinned<runtime::ReconcileResult>>;
  runtime::Result<runtime::ReconcileResult> decideAndWrite(const state::Snapshot& snapshot, const std::string& key,
                                                           std::stop_token stop);
  std::optional<runtime::ReconcileResult> decideOnSnapshot(const state::Snapshot& snapshot, const model::GpuDevice& d,
                                                           const std::string& key);
  // The steps of one pinned write (runtime/conflict.hpp), on the device as read.
  Step decideOn(Round& round);
  Step release(Round& round);
  Step reconcileAttachment(Round& round, const model::AttachmentStep& attachment);
  Step place(Round& round);
  Step markLost(Round& round);
  Step recover(Round& round);
  void holdAhead(const std::string& key, const model::GpuDevice& written, model::DevicePhase seenAs);
  void startTerm() override;
  void snapshotsSet() override;
  model::AttachWindow attachWindow() const;
  void event(const model::GpuDevice& device, const std::string& type, const std::string& reason,
             const std::string& message);

  DeviceBinderOptions options_;
  std::unique_ptr<Metrics> metrics_;

  // The worker's (one at a time; startTerm runs before it in each term).
  mutable std::mutex aheadMu_;
  std::map<std::string, Ahead> ahead_;
  bool caughtUp_ = false;
  // Devices whose waiting condition was written this term, with its reason.
  std::map<std::string, std::string> waiting_;

  // The writer thread's: what changed since the last publication.
  std::set<std::string> changedDevices_;
  std::set<std::string> changedNodes_;
  std::set<std::string> changedVmis_;
  bool wakeAll_ = false;
};

}  // namespace tally::controller
