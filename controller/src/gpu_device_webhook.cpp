#include "tally/controller/gpu_device_webhook.hpp"

#include "tally/controller/device_binder.hpp"

#include "refusals.hpp"

#include <optional>
#include <vector>
#include <string_view>

#include "tally/codec/admission_objects.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/model/admission.hpp"

namespace tally::controller {
namespace {

using detail::describe;
using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::Operation;

// An answer and the reason codes it refuses for (for the refusal metric).
struct Answer {
  AdmissionResponse response;
  std::vector<std::string> codes;
  // Implicit, so that an allowed answer is returned as it is.
  Answer(AdmissionResponse r, std::string code = {}) : response(std::move(r)) {
    if (!code.empty()) codes.push_back(std::move(code));
  }
};

Answer refusedBy(const model::Decision& decision, AdmissionResponse response) {
  Answer a(std::move(response));
  for (const auto& r : decision.refusals) a.codes.emplace_back(model::toString(r.code));
  return a;
}

struct Decoded {
  model::GpuDevice device;
  std::string error;  // set: the object could not be read
};

Decoded decodeDevice(const simdjson::padded_string& json, const AdmissionRequest& request, const char* which) {
  auto decoded = codec::decodeAdmittedGpuDevice(json, request.namespace_, request.name, which);
  return {std::move(decoded.value), std::move(decoded.error)};
}

using codec::rawMember;

// Whether metadata.finalizers holds the binder's finalizer (false when unreadable).
bool holdsReleaseFinalizer(const simdjson::padded_string& json) {
  return codec::holdsFinalizer(json, kReleaseFinalizer);
}

std::string subjectOf(const model::GpuDevice& d) {
  return "gpudevice/" + d.ns + "/" + (d.name.empty() ? std::string("(generated name)") : d.name);
}

Answer reviewCreate(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  Decoded created = decodeDevice(request.object, request, "created");
  if (!created.error.empty()) return {invalid(created.error), "Unreadable"};
  const model::GpuDevice& d = created.device;
  const std::string subject = subjectOf(d);
  if (!snapshot.ready()) {
    return {forbidden("[CacheNotSynced] " + subject + " refused: " + snapshot.unsyncedCaches() +
                      ", so the order cannot be checked (this replica is still starting)"),
            std::string(model::toString(model::Code::CacheNotSynced))};
  }
  model::DeviceOrder order{d.ns, subject, {{d.className, d.count}}};
  model::Decision decision = model::checkDeviceOrder(snapshot.cluster(), snapshot.usage, order);
  if (decision.allowed()) return AdmissionResponse::allow();
  return refusedBy(decision, forbidden(describe(decision)));
}

Answer reviewUpdate(const AdmissionRequest& request, const GpuDeviceWebhookOptions& options) {
  const std::string who = request.userInfo.username;
  const bool tally = who == options.controllerIdentity;
  const std::string subject = "gpudevice/" + request.namespace_ + "/" + request.name;
  const bool statusWrite = request.subResource == "status";
  if (!statusWrite && rawMember(request.object, "spec") != rawMember(request.oldObject, "spec")) {
    return {invalid(subject +
                    " refused: spec is immutable (class and count are the order); release this device and order a "
                    "new one"),
            "SpecImmutable"};
  }
  if (!tally && rawMember(request.object, "status") != rawMember(request.oldObject, "status")) {
    return {
        forbidden(subject + " refused: its status (phase, node, attachedTo, conditions) is written only by " +
                  options.controllerIdentity + ", not by " + (who.empty() ? std::string("an anonymous user") : who)),
        "StatusNotTally"};
  }
  // The finalizer keeps a placed device until its release is recorded: only
  // Tally takes it away (a tenant who could would free units unrecorded).
  if (!tally && holdsReleaseFinalizer(request.oldObject) && !holdsReleaseFinalizer(request.object)) {
    return {forbidden(subject + " refused: the finalizer " + std::string(kReleaseFinalizer) + " is removed only by " +
                      options.controllerIdentity +
                      ", once the release of the device's units is recorded; delete the device to release it"),
            "FinalizerNotTally"};
  }
  return AdmissionResponse::allow();
}

Answer reviewDelete(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  model::GpuDevice device;
  if (request.hasOldObject()) {
    Decoded old = decodeDevice(request.oldObject, request, "deleted");
    if (!old.error.empty()) return {invalid(old.error), "Unreadable"};
    device = std::move(old.device);
  } else {
    // An API server that sends no oldObject: what this replica's cache holds.
    auto it = snapshot.cluster().devices.find(model::objectKey(request.namespace_, request.name));
    if (it == snapshot.cluster().devices.end()) {
      return {forbidden("gpudevice/" + request.namespace_ + "/" + request.name +
                        " refused: the request carries no old object and this replica's cache holds none, so the "
                        "VMI holding it is unknown"),
              std::string(model::toString(model::Code::DeviceUnknown))};
    }
    device = it->second;
  }
  model::Decision decision = model::checkDeviceDeletion(snapshot.cluster(), device);
  if (decision.allowed()) return AdmissionResponse::allow();
  return refusedBy(decision, forbidden(describe(decision)));
}

Answer decide(const state::Snapshot& snapshot, const AdmissionRequest& request,
              const GpuDeviceWebhookOptions& options) {
  if (request.kind.group != "gpu.tally.dev" || request.kind.kind != "GPUDevice") {
    return {
        invalid("this webhook reviews gpu.tally.dev GPUDevices, not " + request.kind.group + "/" + request.kind.kind),
        "WrongKind"};
  }
  switch (request.operation) {
    case Operation::kCreate: return reviewCreate(snapshot, request);
    case Operation::kUpdate: return reviewUpdate(request, options);
    case Operation::kDelete: return reviewDelete(snapshot, request);
    case Operation::kConnect: return AdmissionResponse::allow();
  }
  return AdmissionResponse::allow();
}

}  // namespace

observability::Family<observability::Counter>& gpuDeviceRefusalMetric(observability::Registry& registry) {
  return registry.counter("tally_controller_gpudevice_refusals_total",
                          "GPUDevice admission refusals by operation and reason code.", {"operation", "code"});
}

AdmissionResponse reviewGpuDevice(const state::Snapshot& snapshot, const AdmissionRequest& request,
                                  const GpuDeviceWebhookOptions& options) {
  Answer answer = decide(snapshot, request, options);
  if (options.refusals) {
    const std::string_view op = runtime::admission::operationName(request.operation);
    for (const auto& code : answer.codes) options.refusals->with({op, code}).inc();
  }
  return std::move(answer.response);
}

runtime::admission::WebhookHandler gpuDeviceWebhook(const SnapshotCell<state::Snapshot>& cell,
                                                    GpuDeviceWebhookOptions options) {
  return [&cell, options = std::move(options)](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuDevice(*snapshot, request, options);
  };
}

}  // namespace tally::controller
