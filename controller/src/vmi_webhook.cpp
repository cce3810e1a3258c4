#include "tally/controller/vmi_webhook.hpp"

#include <algorithm>
#include <fmt/format.h>

#include <random>
#include <set>

#include "device_status.hpp"
#include "tally/codec/device_status.hpp"
#include "tally/codec/vmi_devices.hpp"
#include "refusals.hpp"
#include "tally/codec/admission_objects.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/vmi.hpp"
#include "tally/runtime/conflict.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/state/kinds.hpp"
#include "tally/state/watch_codec.hpp"

namespace tally::controller {

namespace obs = tally::observability;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::Answer;
using runtime::admission::Operation;
using Clock = std::chrono::steady_clock;

struct VmiWebhook::Metrics {
  explicit Metrics(obs::Registry& r)
      : reviews(r.counter("tally_controller_vmi_reviews_total",
                          "VMI CREATE reviews with Tally device references, by result (admitted, refused, dry-run, "
                          "reinvoked).",
                          {"result"})),
        conflicts(r.counter("tally_controller_vmi_attach_conflicts_total",
                            "Attachment writes refused with 409 (a newer device): read and decided again.")
                      .with({})),
        moved(r.counter("tally_controller_vmi_held_devices_moved_total",
                        "Held devices (attached to no VM) the VM door unplaced so that the binder places the whole "
                        "set of a VMI on a node with room for it: their node had none for the rest of the set.")
                  .with({})),
        undone(r.counter("tally_controller_vmi_writes_undone_total",
                         "Attachments and template devices a refused CREATE took back.")
                   .with({})),
        seconds(r.histogram("tally_controller_vmi_review_seconds",
                            "Time to answer a VMI CREATE with device references, the wait for the binder included.",
                            obs::exponentialBuckets(0.001, 2, 14))
                    .with({})),
        waitSeconds(r.histogram("tally_controller_vmi_placement_wait_seconds",
                                "Time a VMI CREATE waited for the binder to place its set.",
                                obs::exponentialBuckets(0.001, 2, 14))
                        .with({})) {}
  obs::Family<obs::Counter>& reviews;
  obs::Counter& conflicts;
  obs::Counter& moved;
  obs::Counter& undone;
  obs::Histogram& seconds;
  obs::Histogram& waitSeconds;
};

namespace {

using codec::DomainDevices;
using codec::readDomainDevices;
using detail::describe;
using detail::devicesResource;
using detail::forbidden;
using detail::invalid;
using detail::RecordCodec;

std::string newToken() {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  return fmt::format("{:016x}", random());
}

std::string referencesOf(const model::VirtualMachineInstance& vmi) {
  std::string out;
  for (const auto& name : vmi.heldDevices) out += name + ",";
  out += "|";
  for (const auto& t : vmi.deviceTemplates) out += fmt::format("{}:{},", t.className, t.count);
  return out;
}

}  // namespace

// One CREATE's writes, so that a failure can take them back.
struct VmiWebhook::Call {
  VmiWebhook& self;
  std::string ns, vmi, token;
  std::vector<std::string> set;
  model::Timestamp since = 0;
  std::vector<std::string> attached;                         // held devices this call attached
  std::vector<std::pair<std::string, std::string>> created;  // template devices it created: name, uid

  runtime::Resource res() const { return devicesResource().inNamespace(ns); }

  void step(const std::string& what) {
    if (self.options_.beforeWrite) self.options_.beforeWrite(what);
  }

  // Attaches one held device in the pinned-write frame (runtime/conflict.hpp):
  // read, decide on what was read, write pinned to its resourceVersion; 409
  // reads again. Empty on success, else the refusal.
  // `move`: the plan moves it (VmiStart::move): attached unplaced, for the
  // binder to place with the rest of the set.
  std::string attach(const std::string& name, bool move) {
    const std::string subject = fmt::format("gpudevice/{}/{}", ns, name);
    runtime::PinnedWriteOptions po;
    po.maxAttempts = self.options_.maxConflicts;
    po.onConflict = [this] {
      if (self.metrics_) self.metrics_->conflicts.inc();
    };
    auto refusal = runtime::pinnedWrite<std::string, RecordCodec>(
        *self.client_, res(), name,
        [&](codec::GpuDeviceRecord& record) -> runtime::Result<runtime::Pinned<std::string>> {
          using Next = runtime::Pinned<std::string>;
          if (std::string why = unavailable(subject, record.device); !why.empty()) return Next::finish(why);
          const model::GpuDevice next =
              model::attachedBy(move ? model::unplaced(record.device) : record.device, ns, vmi, token, set, since);
          runtime::JsonPatch patch;
          patch.add("/status", codec::encodeGpuDeviceStatus(next, record.conditions, record.meta.generation));
          runtime::PatchOptions status;
          status.subresource = "status";
          step("attach " + ns + "/" + name);
          auto written = self.client_->patch(res(), name, runtime::PatchType::kJsonPatch,
                                             patch.body(record.meta.resourceVersion), status);
          if (!written && written.error().is(runtime::ErrorCode::kConflict)) return std::move(written).error();
          if (!written) return Next::finish(subject + " was not attached: " + written.error().describe());
          attached.push_back(name);
          return Next::finish(std::string());
        },
        po);
    if (refusal) return *refusal;
    if (refusal.error().is(runtime::ErrorCode::kConflict)) {
      return fmt::format("{} was not attached: still conflicting after {} attempts", subject,
                         self.options_.maxConflicts);
    }
    return subject + " cannot be read: " + refusal.error().describe();
  }

  // Why `fresh` (as just read) cannot be attached to this VMI; empty: it can.
  std::string unavailable(const std::string& subject, const model::GpuDevice& fresh) {
    if (fresh.deleting || fresh.phase == model::DevicePhase::Released || fresh.phase == model::DevicePhase::Lost) {
      return fmt::format("[DeviceUnavailable] {} is {}{}", subject, model::toString(fresh.phase),
                         fresh.deleting ? " and being deleted" : "");
    }
    if (!model::attached(fresh) || fresh.attachToken == token) return {};
    auto snap = self.cell_->read();
    const model::AttachWindow window{toUnixTime(std::chrono::system_clock::now()).seconds,
                                     self.options_.attachTimeout.count()};
    std::string holder = model::attachmentHolder(snap->cluster(), fresh, window);
    // Free by this replica's snapshot, which may lag the device just read
    // (another replica attached it, the VMI was created and the binder
    // recorded its uid before this cache saw the VMI): the holder is gone
    // only when the API server says so.
    if (holder.empty()) holder = liveHolder(fresh);
    if (holder.empty()) return {};
    return fmt::format("[DeviceAttached] {} is attached to {}; a device serves one VM at a time", subject, holder);
  }

  // The holder of `device`'s attachment as the API server has it now: its
  // VMI read, judged by the model; a VMI that cannot be read holds it (fail closed).
  std::string liveHolder(const model::GpuDevice& device) {
    const std::string vmiNs = device.attachedTo.ns.empty() ? device.ns : device.attachedTo.ns;
    const std::string subject = "vmi/" + vmiNs + "/" + device.attachedTo.name;
    // The VMI's resource and codec as the informers have them (state/kinds.hpp).
    constexpr model::Kind kVmi = model::Kind::VirtualMachineInstance;
    static const runtime::Resource vmis = state::resourceOf(kVmi);
    auto body = self.client_->get(vmis.inNamespace(vmiNs), device.attachedTo.name);
    if (!body) {
      if (body.error().is(runtime::ErrorCode::kNotFound)) return {};
      return subject + " (it cannot be read to prove it gone: " + body.error().describe() + ")";
    }
    auto live = runtime::decodeJsonObject<state::WatchCodec<state::KindCodec<kVmi>::type>>(*body);
    if (!live) return subject + " (it cannot be read to prove it gone: " + live.error().describe() + ")";
    return model::holdsAttachment(live->value, device) ? subject : std::string();
  }

  std::string create(const model::TemplateDevice& t) {
    // Created with the binder's finalizer: the binder places it at once,
    // without first writing the finalizer (one API round trip less per VMI).
    const std::string body = codec::encodeTemplateGpuDevice(
        {ns, t.name, t.className, t.count, std::string(kReleaseFinalizer), vmi, token, set, since});
    step("create " + ns + "/" + t.name);
    auto made = self.client_->create(res(), body);
    if (made) {
      auto read = runtime::decodeJsonObject<RecordCodec>(*made);
      created.emplace_back(t.name, read ? read->device.uid : std::string());
      return {};
    }
    if (made.error().is(runtime::ErrorCode::kAlreadyExists)) {
      // A retried call made it already: ours when it carries the token.
      auto existing = self.client_->get(res(), t.name);
      auto read = existing ? runtime::decodeJsonObject<RecordCodec>(*existing)
                           : runtime::Result<codec::GpuDeviceRecord>(std::move(existing).error());
      if (read && read->device.fromTemplate && read->device.attachToken == token) return {};
      return fmt::format("[DeviceUnavailable] gpudevice/{}/{} exists already and is not this VM's", ns, t.name);
    }
    return fmt::format("template device {}/{} ({} GPU(s) of class {}) was not created: {}", ns, t.name, t.count,
                       t.className, made.error().describe());
  }

  // Takes back what this call wrote (best effort: the binder undoes an
  // attachment whose VMI never appears in any case).
  void undo() {
    runtime::DeleteOptions del;
    for (const auto& [name, uid] : created) {
      del.preconditionUid = uid;
      auto gone = self.client_->remove(res(), name, del);
      if (!gone && !gone.error().is(runtime::ErrorCode::kNotFound)) {
        logWarning("vmi webhook: template device not deleted",
                   {{"device", ns + "/" + name}, {"error", gone.error().describe()}});
      } else if (self.metrics_) {
        self.metrics_->undone.inc();
      }
    }
    runtime::PinnedWriteOptions po;
    po.maxAttempts = self.options_.maxConflicts;
    for (const auto& name : attached) {
      auto undone = runtime::pinnedWrite<bool, RecordCodec>(
          *self.client_, res(), name,
          [&](codec::GpuDeviceRecord& record) -> runtime::Result<runtime::Pinned<bool>> {
            // Attached since by another call: not ours to take back.
            if (record.device.attachToken != token) return runtime::Pinned<bool>::finish(false);
            runtime::JsonPatch patch;
            patch.add("/status", codec::encodeGpuDeviceStatus(model::detached(record.device), record.conditions,
                                                              record.meta.generation));
            runtime::PatchOptions status;
            status.subresource = "status";
            auto written = self.client_->patch(res(), name, runtime::PatchType::kJsonPatch,
                                               patch.body(record.meta.resourceVersion), status);
            if (!written) return std::move(written).error();
            return runtime::Pinned<bool>::finish(true);
          },
          po);
      if (undone && *undone && self.metrics_) self.metrics_->undone.inc();
    }
  }
};

VmiWebhook::VmiWebhook(std::shared_ptr<runtime::Client> client, VmiWebhookOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

VmiWebhook::~VmiWebhook() = default;

void VmiWebhook::published(const state::Snapshot&) {
  {
    std::lock_guard lock(publishedMu_);
    ++publications_;
  }
  publishedCv_.notify_all();
}

void VmiWebhook::stopped() {
  {
    std::lock_guard lock(publishedMu_);
    stopped_ = true;
  }
  publishedCv_.notify_all();
}

std::optional<std::string> VmiWebhook::waitPlaced(const std::string& ns, const std::vector<std::string>& set,
                                                  Clock::time_point deadline, std::string& why) {
  std::unique_lock lock(publishedMu_);
  for (;;) {
    // The count before the read: a publication after it wakes the wait below.
    const std::uint64_t seen = publications_;
    lock.unlock();
    model::SetNode placed = model::placedSet(cell_->read()->cluster(), ns, set);
    if (placed.node) return placed.node;
    why = placed.decision.summary();
    lock.lock();
    if (!publishedCv_.wait_until(lock, deadline, [&] { return publications_ != seen || stopped_; }) || stopped_) {
      return std::nullopt;
    }
  }
}

runtime::admission::Mutator VmiWebhook::handler() {
  return {[this](const AdmissionRequest& request) { return review(request); }};
}

Answer VmiWebhook::review(const AdmissionRequest& request) {
  if (request.kind.group != "kubevirt.io" || request.kind.kind != "VirtualMachineInstance") {
    return invalid("WrongKind", "this webhook reviews kubevirt.io VirtualMachineInstances, not " + request.kind.group +
                                    "/" + request.kind.kind);
  }
  if (request.operation != Operation::kCreate) return Answer::allow();
  const auto start = Clock::now();
  Answer answer = create(request);
  if (metrics_) metrics_->seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
  return answer;
}

std::string VmiWebhook::tokenFor(const std::string& key, const std::string& references) {
  std::lock_guard lock(recentMu_);
  const auto now = Clock::now();
  std::erase_if(recent_, [&](const auto& entry) { return entry.second.until < now; });
  auto it = recent_.find(key);
  if (it != recent_.end() && it->second.references == references) return it->second.token;
  std::string token = newToken();
  recent_[key] = Recent{references, token, now + options_.attachTimeout};
  return token;
}

Answer VmiWebhook::create(const AdmissionRequest& request) {
  auto decoded = codec::decodeText<codec::VirtualMachineInstanceCodec>(
      std::string_view(request.object.data(), request.object.size()));
  if (!decoded)
    return invalid("Unreadable", "the VirtualMachineInstance cannot be read: " + decoded.error().describe());
  model::VirtualMachineInstance vmi = std::move(decoded).value();
  if (vmi.ns.empty()) vmi.ns = request.namespace_;
  if (vmi.name.empty()) vmi.name = request.name;
  if (vmi.heldDevices.empty() && vmi.deviceTemplates.empty()) return Answer::allow();
  const std::string subject = fmt::format("vmi/{}/{}", vmi.ns, vmi.name);
  if (vmi.name.empty()) {
    count("refused");
    return invalid("NameRequired",
                   "a VirtualMachineInstance with Tally devices needs a name (generateName is not supported)");
  }
  DomainDevices domain = readDomainDevices(request.object);
  if (!domain.error.empty()) return invalid("Unreadable", subject + ": " + domain.error);
  if (!domain.hasDomain) return invalid("Unreadable", subject + " has no spec.domain");
  if (!cell_) return forbidden("NoState", subject + " refused: this replica has no cluster state to decide on");

  const model::AttachWindow window{toUnixTime(std::chrono::system_clock::now()).seconds,
                                   options_.attachTimeout.count()};
  std::string token;
  const model::VmiStart plan = planStart(vmi, subject, window, token);
  if (!plan.decision.allowed()) return refused(plan.decision);
  if (!request.dryRun) {
    Call call{*this, vmi.ns, vmi.name, token, plan.set, window.now, {}, {}};
    if (std::string why = write(call, plan); !why.empty()) {
      call.undo();
      count("refused");
      return forbidden("WriteFailed", subject + " refused: " + why);
    }
  }
  const bool writes = !plan.attach.empty() || !plan.create.empty();
  count(request.dryRun ? "dry-run" : (writes ? "admitted" : "reinvoked"));
  // The answer: the token, and the gpus entries (others' entries kept).
  runtime::JsonPatch patch;
  patch.addString(runtime::JsonPatch::pointer({"metadata", "annotations", model::kAnnotationVmiAttachment}), token);
  patch.add(domain.hasDevices ? "/spec/domain/devices/gpus" : "/spec/domain/devices",
            codec::encodeVmiGpus(domain, plan.gpus));
  return Answer::patch(std::move(patch));
}

void VmiWebhook::count(const char* result) {
  if (metrics_) metrics_->reviews.with({result}).inc();
}

Answer VmiWebhook::refused(const model::Decision& decision) {
  count("refused");
  return detail::refusedBy(decision);
}

// The plan on this replica's snapshot, read for the plan only: not held
// across the writes and the wait. `token` is the attachment's.
model::VmiStart VmiWebhook::planStart(const model::VirtualMachineInstance& vmi, const std::string& subject,
                                      model::AttachWindow window, std::string& token) {
  auto snap = cell_->read();
  if (!snap->ready()) {
    model::VmiStart refused;
    refused.decision.refuse(
        model::Code::CacheNotSynced,
        fmt::format("{} refused: {}, so its devices cannot be checked (this replica is still starting)", subject,
                    snap->unsyncedCaches()));
    return refused;
  }
  const model::Cluster& cluster = snap->cluster();
  // The VMI's own token when the API server calls again with our answer
  // applied. A create retried after a call that wrote (here or on another
  // replica) finds that call's attachment to its name and takes it; one
  // retried before it wrote reuses the token of the same references.
  const bool reinvoked = !vmi.attachToken.empty() && !model::tokenTaken(cluster, vmi.ns, vmi.attachToken);
  token = reinvoked ? vmi.attachToken : model::startingToken(cluster, vmi.ns, vmi.name, window);
  if (token.empty()) token = tokenFor(model::objectKey(vmi.ns, vmi.name), referencesOf(vmi));
  return model::planVmiStart(cluster, snap->usage, vmi, token, window);
}

// The plan's writes, then the wait for the binder to place the set (this
// replica's watch shows it). Empty when placed, else why not.
std::string VmiWebhook::write(Call& call, const model::VmiStart& plan) {
  for (const auto& name : plan.attach) {
    const bool move = std::find(plan.move.begin(), plan.move.end(), name) != plan.move.end();
    if (std::string why = call.attach(name, move); !why.empty()) return why;
    if (move && metrics_) metrics_->moved.inc();
  }
  for (const auto& t : plan.create) {
    if (std::string why = call.create(t); !why.empty()) return why;
  }
  const auto waitStart = Clock::now();
  std::string last;
  const std::optional<std::string> node = waitPlaced(call.ns, plan.set, waitStart + options_.placementWait, last);
  if (metrics_) metrics_->waitSeconds.observe(std::chrono::duration<double>(Clock::now() - waitStart).count());
  if (node) return {};
  return fmt::format("the binder did not place its device set on one node within {} ms ({})",
                     options_.placementWait.count(), last);
}

}  // namespace tally::controller
