#include "tally/controller/vmi_webhook.hpp"

#include <fmt/format.h>

#include <random>
#include <set>

#include "device_status.hpp"
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
using runtime::admission::Operation;
using Clock = std::chrono::steady_clock;

struct VmiWebhook::Metrics {
  explicit Metrics(obs::Registry& r)
      : reviews(r.counter("tally_controller_vmi_reviews_total",
                          "VMI CREATE reviews with Tally device references, by result (admitted, refused, dry-run, "
                          "reinvoked).",
                          {"result"})),
        refusals(
            r.counter("tally_controller_vmi_refusals_total", "VMI refusals by the model's reason code.", {"code"})),
        conflicts(r.counter("tally_controller_vmi_attach_conflicts_total",
                            "Attachment writes refused with 409 (a newer device): read and decided again.")
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
  obs::Family<obs::Counter>& refusals;
  obs::Counter& conflicts;
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

// The template-of annotation of a device the webhook creates.
std::string templateAnnotation(const std::string& vmi, const std::string& token, const std::vector<std::string>& set,
                               model::Timestamp since) {
  JsonWriter w;
  w.beginObject().field("vmi", vmi).field("token", token);
  w.key("set").beginArray();
  for (const auto& name : set) w.value(name);
  w.endArray();
  w.field("since", formatRfc3339(since)).endObject();
  return w.str();
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

  // Attaches one held device: read, decide on what was read, write pinned to
  // its resourceVersion; 409 reads again. Empty on success, else the refusal.
  std::string attach(const std::string& name) {
    for (int attempt = 0; attempt < self.options_.maxConflicts; ++attempt) {
      auto body = self.client_->get(res(), name);
      if (!body) return fmt::format("gpudevice/{}/{} cannot be read: {}", ns, name, body.error().describe());
      auto read = runtime::decodeJsonObject<RecordCodec>(*body);
      if (!read) return fmt::format("gpudevice/{}/{} cannot be read: {}", ns, name, read.error().describe());
      codec::GpuDeviceRecord record = std::move(read).value();
      const model::GpuDevice& fresh = record.device;
      if (fresh.deleting || fresh.phase == model::DevicePhase::Released || fresh.phase == model::DevicePhase::Lost) {
        return fmt::format("[DeviceUnavailable] gpudevice/{}/{} is {}{}", ns, name, model::toString(fresh.phase),
                           fresh.deleting ? " and being deleted" : "");
      }
      if (model::attached(fresh) && fresh.attachToken != token) {
        auto snap = self.cell_->read();
        const model::AttachWindow window{toUnixTime(std::chrono::system_clock::now()).seconds,
                                         self.options_.attachTimeout.count()};
        std::string holder = model::attachmentHolder(snap->cluster(), fresh, window);
        // Free by this replica's snapshot, which may lag the device just read
        // (another replica attached it, the VMI was created and the binder
        // recorded its uid before this cache saw the VMI): the holder is gone
        // only when the API server says so.
        if (holder.empty()) holder = liveHolder(fresh);
        if (!holder.empty()) {
          return fmt::format("[DeviceAttached] gpudevice/{}/{} is attached to {}; a device serves one VM at a time", ns,
                             name, holder);
        }
      }
      model::GpuDevice next = fresh;
      next.attachedTo = model::ObjectRef{ns, vmi, ""};
      next.attachToken = token;
      next.attachSet = set;
      next.attachedAt = since;
      if (model::holdsNodeUnits(next)) next.phase = model::DevicePhase::Attached;
      runtime::JsonPatch patch;
      patch.add("/status", detail::deviceStatusJson(next, record.conditions, record.meta.generation));
      runtime::PatchOptions po;
      po.subresource = "status";
      step("attach " + ns + "/" + name);
      auto written =
          self.client_->patch(res(), name, runtime::PatchType::kJsonPatch, patch.body(record.meta.resourceVersion), po);
      if (written) {
        attached.push_back(name);
        return {};
      }
      if (!written.error().is(runtime::ErrorCode::kConflict)) {
        return fmt::format("gpudevice/{}/{} was not attached: {}", ns, name, written.error().describe());
      }
      if (self.metrics_) self.metrics_->conflicts.inc();
    }
    return fmt::format("gpudevice/{}/{} was not attached: still conflicting after {} attempts", ns, name,
                       self.options_.maxConflicts);
  }

  // The holder of `device`'s attachment as the API server has it now: its
  // VMI read, judged by the model; a VMI that cannot be read holds it (fail closed).
  std::string liveHolder(const model::GpuDevice& device) {
    const std::string vmiNs = device.attachedTo.ns.empty() ? device.ns : device.attachedTo.ns;
    const std::string subject = "vmi/" + vmiNs + "/" + device.attachedTo.name;
    // The VMI's resource and codec as the informers have them (state/kinds.hpp).
    constexpr model::Kind kVmi = model::Kind::VirtualMachineInstance;
    static const runtime::Resource vmis =
        runtime::Resource::of(std::string(state::kindInfo(kVmi).group), std::string(state::kindInfo(kVmi).version),
                              std::string(state::kindInfo(kVmi).resource));
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
    JsonWriter w;
    w.beginObject().field("apiVersion", "gpu.tally.dev/v1alpha1").field("kind", "GPUDevice");
    w.key("metadata").beginObject().field("name", t.name).field("namespace", ns);
    // Created with the binder's finalizer: the binder places it at once,
    // without first writing the finalizer (one API round trip less per VMI).
    w.key("finalizers").beginArray().value(kReleaseFinalizer).endArray();
    w.key("annotations").beginObject();
    w.field(model::kAnnotationTemplateOf, templateAnnotation(vmi, token, set, since));
    w.endObject().endObject();
    w.key("spec").beginObject().field("class", t.className).field("count", t.count).endObject();
    w.endObject();
    step("create " + ns + "/" + t.name);
    auto made = self.client_->create(res(), w.str());
    if (made) {
      auto read = runtime::decodeJsonObject<RecordCodec>(*made);
      created.emplace_back(t.name, read ? read->device.uid : std::string());
      return {};
    }
    if (made.error().is(runtime::ErrorCode::kAlreadyExists)) {
      // A retried call made it already: ours when it carries the token.
      auto body = self.client_->get(res(), t.name);
      auto read = body ? runtime::decodeJsonObject<RecordCodec>(*body)
                       : runtime::Result<codec::GpuDeviceRecord>(std::move(body).error());
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
    for (const auto& name : attached) {
      for (int attempt = 0; attempt < self.options_.maxConflicts; ++attempt) {
        auto body = self.client_->get(res(), name);
        if (!body) break;
        auto read = runtime::decodeJsonObject<RecordCodec>(*body);
        if (!read || read->device.attachToken != token) break;
        runtime::JsonPatch patch;
        patch.add("/status",
                  detail::deviceStatusJson(detail::detached(read->device), read->conditions, read->meta.generation));
        runtime::PatchOptions po;
        po.subresource = "status";
        auto written = self.client_->patch(res(), name, runtime::PatchType::kJsonPatch,
                                           patch.body(read->meta.resourceVersion), po);
        if (written) {
          if (self.metrics_) self.metrics_->undone.inc();
          break;
        }
        if (!written.error().is(runtime::ErrorCode::kConflict)) break;
      }
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

runtime::admission::WebhookHandler VmiWebhook::handler() {
  return [this](const AdmissionRequest& request) { return review(request); };
}

AdmissionResponse VmiWebhook::review(const AdmissionRequest& request) {
  if (request.kind.group != "kubevirt.io" || request.kind.kind != "VirtualMachineInstance") {
    return invalid("this webhook reviews kubevirt.io VirtualMachineInstances, not " + request.kind.group + "/" +
                   request.kind.kind);
  }
  if (request.operation != Operation::kCreate) return AdmissionResponse::allow();
  const auto start = Clock::now();
  AdmissionResponse answer = create(request);
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

AdmissionResponse VmiWebhook::create(const AdmissionRequest& request) {
  auto decoded = codec::decodeText<codec::VirtualMachineInstanceCodec>(
      std::string_view(request.object.data(), request.object.size()));
  if (!decoded) return invalid("the VirtualMachineInstance cannot be read: " + decoded.error().describe());
  model::VirtualMachineInstance vmi = std::move(decoded).value();
  if (vmi.ns.empty()) vmi.ns = request.namespace_;
  if (vmi.name.empty()) vmi.name = request.name;
  if (vmi.heldDevices.empty() && vmi.deviceTemplates.empty()) return AdmissionResponse::allow();
  const std::string subject = fmt::format("vmi/{}/{}", vmi.ns, vmi.name);
  auto count = [&](const char* result) {
    if (metrics_) metrics_->reviews.with({result}).inc();
  };
  auto refused = [&](const model::Decision& decision) {
    count("refused");
    if (metrics_) {
      for (const auto& r : decision.refusals) metrics_->refusals.with({model::toString(r.code)}).inc();
    }
    return forbidden(describe(decision));
  };
  if (vmi.name.empty()) {
    count("refused");
    return invalid("a VirtualMachineInstance with Tally devices needs a name (generateName is not supported)");
  }
  DomainDevices domain = readDomainDevices(request.object);
  if (!domain.error.empty()) return invalid(subject + ": " + domain.error);
  if (!domain.hasDomain) return invalid(subject + " has no spec.domain");

  if (!cell_) return forbidden(subject + " refused: this replica has no cluster state to decide on");
  const model::AttachWindow window{toUnixTime(std::chrono::system_clock::now()).seconds,
                                   options_.attachTimeout.count()};
  std::string token;
  model::VmiStart plan;
  {
    // The snapshot is read for the plan only: not held across the writes and the wait.
    auto snap = cell_->read();
    if (!snap->ready()) {
      model::Decision d;
      d.refuse(model::Code::CacheNotSynced,
               fmt::format("{} refused: {}, so its devices cannot be checked (this replica is still starting)", subject,
                           snap->unsyncedCaches()));
      return refused(d);
    }
    const model::Cluster& cluster = snap->cluster();
    // The VMI's own token when the API server calls again with our answer
    // applied. A create retried after a call that wrote (here or on another
    // replica) finds that call's attachment to its name and takes it; one
    // retried before it wrote reuses the token of the same references.
    const bool reinvoked = !vmi.attachToken.empty() && !model::tokenTaken(cluster, vmi.ns, vmi.attachToken);
    token = reinvoked ? vmi.attachToken : model::startingToken(cluster, vmi.ns, vmi.name, window);
    if (token.empty()) token = tokenFor(model::objectKey(vmi.ns, vmi.name), referencesOf(vmi));
    plan = model::planVmiStart(cluster, snap->usage, vmi, token, window);
  }
  if (!plan.decision.allowed()) return refused(plan.decision);

  Call call{*this, vmi.ns, vmi.name, token, plan.set, window.now, {}, {}};
  const bool writes = !plan.attach.empty() || !plan.create.empty();
  if (!request.dryRun) {
    auto fail = [&](const std::string& why) {
      call.undo();
      count("refused");
      if (metrics_) metrics_->refusals.with({"WriteFailed"}).inc();
      return forbidden(subject + " refused: " + why);
    };
    for (const auto& name : plan.attach) {
      if (std::string why = call.attach(name); !why.empty()) return fail(why);
    }
    for (const auto& t : plan.create) {
      if (std::string why = call.create(t); !why.empty()) return fail(why);
    }
    // The binder places the set; this replica's watch shows it.
    const auto waitStart = Clock::now();
    std::string last;
    const std::optional<std::string> node = waitPlaced(vmi.ns, plan.set, waitStart + options_.placementWait, last);
    if (metrics_) metrics_->waitSeconds.observe(std::chrono::duration<double>(Clock::now() - waitStart).count());
    if (!node) {
      return fail(fmt::format("the binder did not place its device set on one node within {} ms ({})",
                              options_.placementWait.count(), last));
    }
  }
  count(request.dryRun ? "dry-run" : (writes ? "admitted" : "reinvoked"));

  // The answer: the token, and the gpus entries (others' entries kept).
  std::set<std::string> ours;
  for (const auto& g : plan.gpus) ours.insert(g.name);
  std::string array = "[";
  for (const auto& [name, raw] : domain.gpus) {
    if (ours.contains(name)) continue;
    if (array.size() > 1) array += ",";
    array += raw;
  }
  for (const auto& g : plan.gpus) {
    JsonWriter entry;
    entry.beginObject().field("name", g.name).field("deviceName", g.deviceName).endObject();
    if (array.size() > 1) array += ",";
    array += entry.str();
  }
  array += "]";
  runtime::admission::JsonPatch patch;
  patch.add(runtime::admission::JsonPatch::pointer({"metadata", "annotations", model::kAnnotationVmiAttachment}),
            jsonString(token));
  if (domain.hasDevices) {
    patch.add("/spec/domain/devices/gpus", array);
  } else {
    patch.add("/spec/domain/devices", "{\"gpus\":" + array + "}");
  }
  return AdmissionResponse::mutate(std::move(patch));
}

}  // namespace tally::controller
