#include "tally/controller/device_binder.hpp"

#include "device_status.hpp"
#include "tally/codec/device_status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "tally/common/condition.hpp"
#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/usage.hpp"
#include "tally/runtime/conflict.hpp"
#include "tally/runtime/json_watch.hpp"

namespace tally::controller {

namespace obs = tally::observability;
using runtime::ReconcileResult;
using Clock = std::chrono::steady_clock;

namespace {

using detail::devicesResource;

using detail::RecordCodec;

std::string nowText() { return formatRfc3339(toUnixTime(std::chrono::system_clock::now())); }
// Unix seconds, as GpuDevice::created counts them.
std::int64_t unixNow() { return toUnixTime(std::chrono::system_clock::now()).seconds; }

// The first refusal's code names the condition's reason; the message keeps all.
std::string reasonOf(const model::Decision& d) {
  return d.refusals.empty() ? "Unknown" : std::string(model::toString(d.refusals.front().code));
}

}  // namespace

struct DeviceBinder::Metrics {
  explicit Metrics(obs::Registry& r)
      : placements(
            r.counter("tally_controller_binder_placements_total", "GPUDevices the binder placed on a node (Bound).")
                .with({})),
        refusals(r.counter("tally_controller_binder_refusals_total",
                           "Decisions that left a GPUDevice Pending (or Lost), by the model's first refusal code.",
                           {"code"})),
        conflicts(r.counter("tally_controller_binder_conflicts_total",
                            "Writes refused with 409 (a newer object): read and decided again.")
                      .with({})),
        lost(r.counter("tally_controller_binder_lost_total", "Placed GPUDevices marked Lost (node or devices gone).")
                 .with({})),
        recovered(r.counter("tally_controller_binder_recovered_total",
                            "Lost GPUDevices holding their units again (node and devices back).")
                      .with({})),
        releases(r.counter("tally_controller_binder_releases_total", "Deleted GPUDevices whose release was recorded.")
                     .with({})),
        attachments(
            r.counter("tally_controller_binder_attachments_total",
                      "Attachments of the VM door reconciled: uid-recorded, detached (a held device whose VMI is "
                      "gone or never appeared), deleted (such a template device).",
                      {"action"})),
        placementSeconds(r.histogram("tally_controller_binder_placement_seconds",
                                     "Seconds from a GPUDevice's creation to its placement, in whole seconds "
                                     "(creationTimestamp's resolution): 0 is within the second it was created.",
                                     obs::exponentialBuckets(0.5, 2, 12))
                             .with({})),
        pending(r.gauge("tally_controller_binder_pending_devices",
                        "GPUDevices Pending in this replica's snapshot (not being deleted).")
                    .with({})),
        oldestPending(r.gauge("tally_controller_binder_oldest_pending_seconds",
                              "Age of the oldest Pending GPUDevice in this replica's snapshot (0: none).")
                          .with({})) {}
  obs::Counter& placements;
  obs::Family<obs::Counter>& refusals;
  obs::Counter& conflicts;
  obs::Counter& lost;
  obs::Counter& recovered;
  obs::Counter& releases;
  obs::Family<obs::Counter>& attachments;
  obs::Histogram& placementSeconds;
  obs::Gauge& pending;
  obs::Gauge& oldestPending;
};

DeviceBinder::DeviceBinder(std::shared_ptr<runtime::Client> client, DeviceBinderOptions options)
    : LeaderController(std::move(client), {"device-binder", options.component, options.instance}),
      options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

DeviceBinder::~DeviceBinder() = default;

void DeviceBinder::snapshotsSet() {
  if (!options_.metrics) return;
  options_.metrics->onScrape([this] {
    auto snap = cell_->read();
    if (!snap) return;
    const model::Cluster& cluster = snap->cluster();
    std::int64_t count = 0;
    model::Timestamp oldest = 0;
    for (const auto& [key, d] : cluster.devices) {
      if (d.phase != model::DevicePhase::Pending || d.deleting) continue;
      ++count;
      if (d.created > 0 && (oldest == 0 || d.created < oldest)) oldest = d.created;
    }
    metrics_->pending.set(static_cast<double>(count));
    metrics_->oldestPending.set(oldest == 0 ? 0.0 : static_cast<double>(std::max<std::int64_t>(0, unixNow() - oldest)));
  });
}

model::AttachWindow DeviceBinder::attachWindow() const { return {unixNow(), options_.attachTimeout.count()}; }

std::size_t DeviceBinder::heldAhead() const {
  std::lock_guard lock(aheadMu_);
  return ahead_.size();
}

// A new term trusts nothing of the last one: what it held ahead may have been
// overtaken by another leader's writes, so the first reconcile lists again.
void DeviceBinder::startTerm() {
  {
    std::lock_guard lock(aheadMu_);
    ahead_.clear();
    caughtUp_ = false;
  }
  waiting_.clear();
  if (!cell_) return;
  auto snap = cell_->read();
  if (!snap) return;
  for (const auto& [key, d] : snap->cluster().devices) enqueue(key);
}

// --- Waking devices (writer thread) -----------------------------------------

void DeviceBinder::objectChanged(model::Kind kind, const std::string& key) {
  switch (kind) {
    case model::Kind::GpuDevice: changedDevices_.insert(key); break;
    case model::Kind::Node: changedNodes_.insert(key); break;
    // What a placement or a recovery depends on besides nodes and devices.
    case model::Kind::DeviceClass:
    case model::Kind::Namespace:
    case model::Kind::HierarchicalResourceQuota:
    case model::Kind::Organization:
    case model::Kind::VirtualMachineInstance:
      changedVmis_.insert(key);
      wakeAll_ = true;
      break;
    case model::Kind::Ledger: wakeAll_ = true; break;
    default: break;
  }
}

void DeviceBinder::published(const state::Snapshot& snapshot) {
  if (changedDevices_.empty() && changedNodes_.empty() && !wakeAll_) return;
  const model::Cluster& cluster = snapshot.cluster();
  // A VMI that appeared, changed or went: the devices attached to its name.
  for (const auto& vmiKey : changedVmis_) {
    const auto slash = vmiKey.find('/');
    const std::string_view ns = std::string_view(vmiKey).substr(0, slash);
    const std::string_view name = std::string_view(vmiKey).substr(slash + 1);
    for (auto it = cluster.devices.lower_bound(std::string(ns) + "/");
         it != cluster.devices.end() && it->second.ns == ns; ++it) {
      if (model::attached(it->second) && it->second.attachedTo.name == name) enqueue(it->first);
    }
  }
  changedVmis_.clear();
  // Units freed (a node changed, a device gone or no longer holding) may let a
  // waiting order in or a Lost device back.
  bool wake = wakeAll_ || !changedNodes_.empty();
  for (const auto& key : changedDevices_) {
    enqueue(key);
    auto it = cluster.devices.find(key);
    if (it == cluster.devices.end() || !model::holdsNodeUnits(it->second)) wake = true;
  }
  for (const auto& [key, d] : cluster.devices) {
    const bool waiting = d.phase == model::DevicePhase::Pending || d.phase == model::DevicePhase::Lost;
    if ((wake && waiting) || (!d.node.empty() && changedNodes_.contains(d.node))) enqueue(key);
  }
  changedDevices_.clear();
  changedNodes_.clear();
  wakeAll_ = false;
}

// --- Reconcile (the one worker) ---------------------------------------------

runtime::Status DeviceBinder::catchUp(const model::Cluster& cluster) {
  runtime::ListOptions opts;
  opts.limit = 500;
  std::size_t counted = 0;
  do {
    auto response = client_->list(devicesResource(), opts);
    if (!response) return std::move(response).error().withContext("list gpudevices (new term)");
    if (response->status != 200) {
      return runtime::Error(runtime::ErrorCode::kHttp,
                            fmt::format("list gpudevices (new term): HTTP {}", response->status));
    }
    auto page = runtime::decodeJsonList<RecordCodec>(response->body);
    if (!page) return std::move(page).error().withContext("list gpudevices (new term)");
    std::lock_guard lock(aheadMu_);
    for (auto& record : page->items) {
      const model::GpuDevice& fresh = record.device;
      if (!model::holdsNodeUnits(fresh)) continue;
      auto seen = cluster.devices.find(model::objectKey(fresh.ns, fresh.name));
      if (seen != cluster.devices.end() && model::holdsNodeUnits(seen->second) && seen->second.node == fresh.node) {
        continue;
      }
      const model::DevicePhase seenAs =
          seen == cluster.devices.end() ? model::DevicePhase::Pending : seen->second.phase;
      ahead_[model::objectKey(fresh.ns, fresh.name)] = Ahead{fresh, seenAs};
      ++counted;
    }
    opts.continueToken = page->continueToken;
  } while (!opts.continueToken.empty());
  caughtUp_ = true;
  if (counted > 0) logInfo("binder: placements ahead of this replica's watch", {{"devices", std::int64_t(counted)}});
  return {};
}

// Forgets what the snapshot now shows itself: a device gone, or one whose
// phase moved on from the one it had when the binder wrote.
void DeviceBinder::prune(const model::Cluster& cluster) {
  std::lock_guard lock(aheadMu_);
  for (auto it = ahead_.begin(); it != ahead_.end();) {
    auto seen = cluster.devices.find(it->first);
    if (seen == cluster.devices.end() || seen->second.phase != it->second.seenAs) {
      it = ahead_.erase(it);
    } else {
      ++it;
    }
  }
}

model::Placement binderPlacement(const model::Cluster& cluster, const model::HeldAheadView& view,
                                 const model::GpuDevice& seen, const model::GpuDevice& fresh) {
  model::DeviceSet set = model::deviceSetOf(cluster, seen);
  for (auto& m : set.members) {
    if (m == &seen) m = &fresh;
  }
  return model::placeHeldSet(cluster, view, set);
}

model::HeldAheadView DeviceBinder::aheadView(const state::Snapshot& snapshot) const {
  model::HeldAheadView view(snapshot.cluster(), snapshot.usage);
  std::lock_guard lock(aheadMu_);
  for (const auto& [key, a] : ahead_) view.hold(a.device, a.device.node);
  return view;
}

runtime::Result<ReconcileResult> DeviceBinder::reconcile(const std::string& key, std::stop_token stop) {
  if (!cell_) return runtime::Error(runtime::ErrorCode::kInternal, "device binder has no snapshots to read");
  auto snap = cell_->read();
  // Closed while a cache has not synced: nothing is placed on a partial view.
  if (!snap || !snap->ready()) return ReconcileResult::requeueAfter(std::chrono::seconds(1));
  bool caughtUp;
  {
    std::lock_guard lock(aheadMu_);
    caughtUp = caughtUp_;
  }
  if (!caughtUp) {
    if (auto st = catchUp(snap->cluster()); !st) return std::move(st).error();
  }
  prune(snap->cluster());
  return decideAndWrite(*snap, key, stop);
}

// What the snapshot alone says: most reconciles end here without a request.
// An attachment to record or undo always needs one; one waiting for its VMI
// is looked at again when its bound passes. Empty: read the device and decide.
std::optional<ReconcileResult> DeviceBinder::decideOnSnapshot(const state::Snapshot& snapshot,
                                                              const model::GpuDevice& d, const std::string& key) {
  const model::Cluster& cluster = snapshot.cluster();
  const model::AttachmentStep step = model::attachmentStep(cluster, d, attachWindow());
  const bool attachmentWork = !d.deleting && step.action != model::AttachmentAction::Keep;
  if (!attachmentWork) {
    std::lock_guard lock(aheadMu_);
    const bool idle = !d.deleting && (d.phase == model::DevicePhase::Released || ahead_.contains(key) ||
                                      (model::holdsNodeUnits(d) && !model::holdLost(cluster, d)));
    if (idle) {
      if (step.recheckAt <= 0) return ReconcileResult::done();
      return ReconcileResult::requeueAfter(std::chrono::seconds(std::max<std::int64_t>(1, step.recheckAt - unixNow())));
    }
  }
  // An order still waiting for the same reason it was last written with needs
  // no request (the Lost device likewise): look again later.
  auto waited = waiting_.find(key);
  if (waited == waiting_.end() || d.deleting || attachmentWork) return std::nullopt;
  model::HeldAheadView view = aheadView(snapshot);
  std::string reason;
  if (d.phase == model::DevicePhase::Pending) {
    model::Placement p = binderPlacement(cluster, view, d, d);
    if (!p.node) reason = reasonOf(p.decision);
  } else if (d.phase == model::DevicePhase::Lost) {
    model::Decision back = model::checkRecovery(cluster, view, d);
    if (!back.allowed()) reason = reasonOf(back);
  }
  if (!reason.empty() && reason == waited->second) return ReconcileResult::requeueAfter(options_.retryInterval);
  waiting_.erase(waited);
  return std::nullopt;
}

// One round of the pinned write: the device as just read, and its writes.
struct DeviceBinder::Round {
  DeviceBinder& self;
  const state::Snapshot& snapshot;
  const model::GpuDevice& seen;  // the snapshot's
  const std::string& key;
  const runtime::Resource& res;
  const std::string& name;
  codec::GpuDeviceRecord& record;  // as read
  std::string now = nowText();

  const model::GpuDevice& fresh() const { return record.device; }

  runtime::Result<std::string> patchStatus(const model::GpuDevice& next, const std::vector<Condition>& conditions) {
    runtime::JsonPatch patch;
    patch.add("/status", codec::encodeGpuDeviceStatus(next, conditions, record.meta.generation));
    runtime::PatchOptions po;
    po.subresource = "status";
    return self.client_->patch(res, name, runtime::PatchType::kJsonPatch, patch.body(record.meta.resourceVersion), po);
  }

  // The status with `condition` set; false when nothing would change. Waiting
  // for the same reason as written is no write either: with a thousand orders
  // waiting on a full pool, every freed unit would otherwise rewrite all of
  // them for a new count in the message.
  runtime::Result<bool> writeStatus(const model::GpuDevice& next, Condition condition) {
    const model::GpuDevice& f = fresh();
    const bool samePlace = next.phase == f.phase && next.node == f.node;
    if (const Condition* current = findCondition(record.conditions, kBoundCondition);
        current && condition.status == "False" && current->status == "False" && current->reason == condition.reason &&
        samePlace) {
      return false;
    }
    std::vector<Condition> conditions = record.conditions;
    condition.type = std::string(kBoundCondition);
    condition.observedGeneration = record.meta.generation;
    if (!setCondition(conditions, std::move(condition), now) && samePlace) return false;
    auto written = patchStatus(next, conditions);
    if (!written) return std::move(written).error().withContext("status of gpudevice " + key);
    return true;
  }

  // Metadata (finalizers) as a pinned JSON Patch.
  runtime::Result<std::string> patchMeta(const runtime::JsonPatch& patch) {
    return self.client_->patch(res, name, runtime::PatchType::kJsonPatch, patch.body(record.meta.resourceVersion));
  }
};

using Step = runtime::Result<runtime::Pinned<ReconcileResult>>;
using Next = runtime::Pinned<ReconcileResult>;

runtime::Result<ReconcileResult> DeviceBinder::decideAndWrite(const state::Snapshot& snapshot, const std::string& key,
                                                              std::stop_token stop) {
  auto seen = snapshot.cluster().devices.find(key);
  if (seen == snapshot.cluster().devices.end()) {
    waiting_.erase(key);
    std::lock_guard lock(aheadMu_);
    ahead_.erase(key);
    return ReconcileResult::done();
  }
  if (auto decided = decideOnSnapshot(snapshot, seen->second, key)) return *decided;

  const auto slash = key.find('/');
  const runtime::Resource res = devicesResource().inNamespace(key.substr(0, slash));
  const std::string name = key.substr(slash + 1);
  runtime::PinnedWriteOptions po;
  po.maxAttempts = options_.maxConflicts;
  po.stop = stop;
  po.onConflict = [this] {
    if (metrics_) metrics_->conflicts.inc();
  };
  auto decided = runtime::pinnedWrite<ReconcileResult, RecordCodec>(
      *client_, res, name,
      [&](codec::GpuDeviceRecord& record) -> Step {
        if (options_.beforeWrite) options_.beforeWrite(key);
        Round round{*this, snapshot, seen->second, key, res, name, record};
        return decideOn(round);
      },
      po);
  if (decided) return decided;
  if (decided.error().is(runtime::ErrorCode::kNotFound)) return ReconcileResult::done();
  if (decided.error().is(runtime::ErrorCode::kCancelled)) return ReconcileResult::requeue();
  // A device the codec cannot read stays so until it changes: no backoff loop.
  if (decided.error().is(runtime::ErrorCode::kDecode)) return ReconcileResult::terminal(decided.error().describe());
  return std::move(decided).error();
}

Step DeviceBinder::decideOn(Round& round) {
  const model::GpuDevice& fresh = round.fresh();
  if (fresh.deleting) return release(round);
  if (fresh.phase != model::DevicePhase::Released) {
    const model::AttachmentStep attachment = model::attachmentStep(round.snapshot.cluster(), fresh, attachWindow());
    if (attachment.action != model::AttachmentAction::Keep) return reconcileAttachment(round, attachment);
  }
  switch (fresh.phase) {
    case model::DevicePhase::Released: return Next::finish(ReconcileResult::done());
    case model::DevicePhase::Pending: return place(round);
    case model::DevicePhase::Bound:
    case model::DevicePhase::Attached: return markLost(round);
    case model::DevicePhase::Lost: return recover(round);
  }
  return Next::finish(ReconcileResult::done());
}

// Deleted: record the release, then let the object go.
Step DeviceBinder::release(Round& round) {
  const model::GpuDevice& fresh = round.fresh();
  const std::string& key = round.key;
  if (!round.record.meta.hasFinalizer(kReleaseFinalizer)) return Next::finish(ReconcileResult::done());
  if (const model::VirtualMachineInstance* holder = model::runningHolder(round.snapshot.cluster(), fresh)) {
    const std::string message = fmt::format(
        "GPUDevice {} is deleted but VirtualMachineInstance {}/{} still runs "
        "with it; the release waits until the VMI stops",
        key, holder->ns, holder->name);
    auto w = round.writeStatus(fresh, Condition{"", "True", "ReleaseBlocked", message, "", 0});
    if (!w) return std::move(w).error();
    if (*w) event(fresh, "Warning", "ReleaseBlocked", message);
    return Next::finish(ReconcileResult::requeueAfter(options_.retryInterval));
  }
  if (fresh.phase != model::DevicePhase::Released) {
    model::GpuDevice next = fresh;
    next.phase = model::DevicePhase::Released;
    const std::string message =
        model::holdsNodeUnits(fresh)
            ? fmt::format("released {} GPU(s) of class {} on node {}", fresh.count, fresh.className, fresh.node)
            : fmt::format("released (it held no node units: {})", model::toString(fresh.phase));
    auto w = round.writeStatus(next, Condition{"", "False", "Released", message, "", 0});
    if (!w) return std::move(w).error();
    event(fresh, "Normal", "Released", message);
    if (metrics_) metrics_->releases.inc();
    return Next::readAgain();  // the finalizer goes on the new resourceVersion
  }
  auto removed = round.patchMeta(runtime::JsonPatch().removeFinalizer(round.record.meta.finalizers, kReleaseFinalizer));
  // 422: the list changed since the read (its test failed): read again.
  if (!removed && removed.error().is(runtime::ErrorCode::kInvalid)) return Next::readAgain();
  if (!removed && removed.error().is(runtime::ErrorCode::kNotFound)) return Next::finish(ReconcileResult::done());
  if (!removed) return std::move(removed).error().withContext("finalizer of gpudevice " + key);
  std::lock_guard lock(aheadMu_);
  ahead_.erase(key);
  return Next::finish(ReconcileResult::done());
}

// The VM door's attachment: the VMI's uid recorded once it exists; undone
// when the VMI is gone or never appeared (a template device is deleted, its
// release then recorded as any other's; a held one stays Bound).
Step DeviceBinder::reconcileAttachment(Round& round, const model::AttachmentStep& attachment) {
  const model::GpuDevice& fresh = round.fresh();
  const std::string& key = round.key;
  if (attachment.action == model::AttachmentAction::Delete) {
    runtime::DeleteOptions del;
    del.preconditionUid = fresh.uid;
    auto gone = client_->remove(round.res, round.name, del);
    if (!gone && !gone.error().is(runtime::ErrorCode::kNotFound)) {
      return std::move(gone).error().withContext("delete template gpudevice " + key);
    }
    event(fresh, "Normal", "TemplateDeleted", "deleted, its VMI is gone: " + attachment.reason);
    if (metrics_) metrics_->attachments.with({"deleted"}).inc();
    logInfo("binder: template device deleted", {{"device", key}, {"reason", attachment.reason}});
    return Next::finish(ReconcileResult::done());
  }
  const bool fill = attachment.action == model::AttachmentAction::FillUid;
  const model::GpuDevice next = model::attachmentAfter(fresh, attachment);
  auto written = round.patchStatus(next, round.record.conditions);
  if (!written) return std::move(written).error().withContext("attachment of gpudevice " + key);
  const std::string message =
      fill ? fmt::format("attached to vmi/{}/{} (uid {})", next.attachedTo.ns.empty() ? fresh.ns : next.attachedTo.ns,
                         next.attachedTo.name, attachment.uid)
           : "detached, it stays held: " + attachment.reason;
  event(fresh, "Normal", fill ? "Attached" : "Detached", message);
  if (metrics_) metrics_->attachments.with({fill ? "uid-recorded" : "detached"}).inc();
  return Next::decideOn(std::move(written).value());  // decide the rest on the object as written
}

// Pending: placed already (by this leader, or an earlier one the snapshot
// lags), or placed now with the rest of its set to follow to that node.
Step DeviceBinder::place(Round& round) {
  const model::GpuDevice& fresh = round.fresh();
  const std::string& key = round.key;
  if (!round.record.meta.hasFinalizer(kReleaseFinalizer)) {
    auto added = round.patchMeta(runtime::JsonPatch().addFinalizer(round.record.meta.finalizers, kReleaseFinalizer));
    if (!added) return std::move(added).error().withContext("finalizer of gpudevice " + key);
    return Next::decideOn(std::move(added).value());  // decide on the object with its finalizer
  }
  const model::Cluster& cluster = round.snapshot.cluster();
  model::HeldAheadView view = aheadView(round.snapshot);
  // A VMI's set goes to one node: the fresh device in place of the snapshot's,
  // its set from the snapshot's VMIs.
  model::Placement placement = binderPlacement(cluster, view, round.seen, fresh);
  if (!placement.node) {
    const std::string reason = reasonOf(placement.decision);
    auto w = round.writeStatus(fresh, Condition{"", "False", reason, placement.decision.summary(), "", 0});
    if (!w) return std::move(w).error();
    if (*w) {
      event(fresh, "Warning", "PlacementWaiting", placement.decision.summary());
      if (metrics_) metrics_->refusals.with({reason}).inc();
    }
    waiting_[key] = reason;
    return Next::finish(ReconcileResult::requeueAfter(options_.retryInterval));
  }
  model::GpuDevice next = fresh;
  next.phase = model::attached(fresh) ? model::DevicePhase::Attached : model::DevicePhase::Bound;
  next.node = *placement.node;
  const std::string message =
      fmt::format("placed on node {}: {} GPU(s) of class {}", next.node, next.count, next.className);
  auto w = round.writeStatus(next, Condition{"", "True", "Placed", message, "", 0});
  if (!w) return std::move(w).error();
  holdAhead(key, next, round.seen.phase);
  if (metrics_) {
    metrics_->placements.inc();
    if (fresh.created > 0)
      metrics_->placementSeconds.observe(double(std::max<std::int64_t>(0, unixNow() - fresh.created)));
  }
  event(fresh, "Normal", "Placed", message);
  logInfo("binder: placed", {{"device", key}, {"node", next.node}, {"count", fresh.count}});
  for (const model::GpuDevice* m : model::deviceSetOf(cluster, round.seen).members) {
    if (m != &round.seen && m->phase == model::DevicePhase::Pending) enqueue(model::objectKey(m->ns, m->name));
  }
  return Next::finish(ReconcileResult::done());
}

// Bound or Attached: Lost when its node or its devices went.
Step DeviceBinder::markLost(Round& round) {
  const model::GpuDevice& fresh = round.fresh();
  auto lost = model::holdLost(round.snapshot.cluster(), fresh);
  if (!lost) return Next::finish(ReconcileResult::done());
  model::GpuDevice next = fresh;
  next.phase = model::DevicePhase::Lost;
  auto w =
      round.writeStatus(next, Condition{"", "False", std::string(model::toString(lost->code)), lost->message, "", 0});
  if (!w) return std::move(w).error();
  if (*w) {
    event(fresh, "Warning", "Lost", lost->message);
    if (metrics_) metrics_->lost.inc();
    logWarning("binder: device lost", {{"device", round.key}, {"node", fresh.node}, {"reason", lost->message}});
  }
  return Next::finish(ReconcileResult::done());
}

// Lost: Bound (or Attached) again once its node serves its devices again.
Step DeviceBinder::recover(Round& round) {
  const model::GpuDevice& fresh = round.fresh();
  model::HeldAheadView view = aheadView(round.snapshot);
  model::Decision back = model::checkRecovery(round.snapshot.cluster(), view, fresh);
  if (!back.allowed()) {
    const std::string reason = reasonOf(back);
    auto w = round.writeStatus(fresh, Condition{"", "False", reason, back.summary(), "", 0});
    if (!w) return std::move(w).error();
    if (*w && metrics_) metrics_->refusals.with({reason}).inc();
    waiting_[round.key] = reason;
    return Next::finish(ReconcileResult::requeueAfter(options_.retryInterval));
  }
  model::GpuDevice next = fresh;
  next.phase = fresh.attachedTo.empty() ? model::DevicePhase::Bound : model::DevicePhase::Attached;
  const std::string message =
      fmt::format("node {} serves its {} GPU(s) of class {} again", fresh.node, fresh.count, fresh.className);
  auto w = round.writeStatus(next, Condition{"", "True", "Recovered", message, "", 0});
  if (!w) return std::move(w).error();
  holdAhead(round.key, next, round.seen.phase);
  if (metrics_) metrics_->recovered.inc();
  event(fresh, "Normal", "Recovered", message);
  return Next::finish(ReconcileResult::done());
}

void DeviceBinder::holdAhead(const std::string& key, const model::GpuDevice& written, model::DevicePhase seenAs) {
  std::lock_guard lock(aheadMu_);
  ahead_[key] = Ahead{written, seenAs};
}

void DeviceBinder::event(const model::GpuDevice& device, const std::string& type, const std::string& reason,
                         const std::string& message) {
  LeaderController::event({"gpu.tally.dev/v1alpha1", "GPUDevice", device.ns, device.name, device.uid}, type, reason,
                          message);
}

}  // namespace tally::controller
