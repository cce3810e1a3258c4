#include "tally/controller/gpu_device_webhook.hpp"

#include <optional>
#include <string_view>

#include "refusals.hpp"
#include "tally/codec/admission_objects.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/model/admission.hpp"

namespace tally::controller {
namespace {

using detail::answerOf;
using detail::codeName;
using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::Answer;
using runtime::admission::Operation;

// The created object (or, with `old`, the deleted one) with the request's
// namespace and name; the error names `which` it was.
codec::AdmittedObject<model::GpuDevice> decodeDevice(const AdmissionRequest& request, bool old, const char* which) {
  return codec::decodeAdmittedGpuDevice(old ? request.oldObject : request.object, request.namespace_, request.name,
                                        which);
}

std::string subjectOf(const model::GpuDevice& d) {
  return "gpudevice/" + d.ns + "/" + (d.name.empty() ? std::string("(generated name)") : d.name);
}

Answer reviewCreate(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  auto created = decodeDevice(request, false, "created");
  if (!created.error.empty()) return invalid("Unreadable", created.error);
  const model::GpuDevice& d = created.value;
  const std::string subject = subjectOf(d);
  if (!snapshot.ready()) {
    return forbidden(codeName(model::Code::CacheNotSynced),
                     "[CacheNotSynced] " + subject + " refused: " + snapshot.unsyncedCaches() +
                         ", so the order cannot be checked (this replica is still starting)");
  }
  model::DeviceOrder order{d.ns, subject, {{d.className, d.count}}};
  return answerOf(model::checkDeviceOrder(snapshot.cluster(), snapshot.usage, order));
}

Answer reviewUpdate(const AdmissionRequest& request, const GpuDeviceWebhookOptions& options) {
  using codec::rawMember;
  const std::string who = request.userInfo.username;
  const bool tally = who == options.controllerIdentity;
  const std::string subject = "gpudevice/" + request.namespace_ + "/" + request.name;
  const bool statusWrite = request.subResource == "status";
  if (!statusWrite && rawMember(request.object, "spec") != rawMember(request.oldObject, "spec")) {
    return invalid("SpecImmutable", subject +
                                        " refused: spec is immutable (class and count are the order); release this "
                                        "device and order a new one");
  }
  if (!tally && rawMember(request.object, "status") != rawMember(request.oldObject, "status")) {
    return forbidden("StatusNotTally",
                     subject + " refused: its status (phase, node, attachedTo, conditions) is written only by " +
                         options.controllerIdentity + ", not by " +
                         (who.empty() ? std::string("an anonymous user") : who));
  }
  // The finalizer keeps a placed device until its release is recorded: only
  // Tally takes it away (a tenant who could would free units unrecorded).
  if (!tally && codec::holdsFinalizer(request.oldObject, kReleaseFinalizer) &&
      !codec::holdsFinalizer(request.object, kReleaseFinalizer)) {
    return forbidden("FinalizerNotTally", subject + " refused: the finalizer " + std::string(kReleaseFinalizer) +
                                              " is removed only by " + options.controllerIdentity +
                                              ", once the release of the device's units is recorded; delete the "
                                              "device to release it");
  }
  return Answer::allow();
}

Answer reviewDelete(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  model::GpuDevice device;
  if (request.hasOldObject()) {
    auto old = decodeDevice(request, true, "deleted");
    if (!old.error.empty()) return invalid("Unreadable", old.error);
    device = std::move(old.value);
  } else {
    // An API server that sends no oldObject: what this replica's cache holds.
    auto it = snapshot.cluster().devices.find(model::objectKey(request.namespace_, request.name));
    if (it == snapshot.cluster().devices.end()) {
      return forbidden(codeName(model::Code::DeviceUnknown),
                       "gpudevice/" + request.namespace_ + "/" + request.name +
                           " refused: the request carries no old object and this replica's cache holds none, so the "
                           "VMI holding it is unknown");
    }
    device = it->second;
  }
  return answerOf(model::checkDeviceDeletion(snapshot.cluster(), device));
}

}  // namespace

Answer reviewGpuDevice(const state::Snapshot& snapshot, const AdmissionRequest& request,
                       const GpuDeviceWebhookOptions& options) {
  if (request.kind.group != "gpu.tally.dev" || request.kind.kind != "GPUDevice") {
    return invalid("WrongKind", "this webhook reviews gpu.tally.dev GPUDevices, not " + request.kind.group + "/" +
                                    request.kind.kind);
  }
  switch (request.operation) {
    case Operation::kCreate: return reviewCreate(snapshot, request);
    case Operation::kUpdate: return reviewUpdate(request, options);
    case Operation::kDelete: return reviewDelete(snapshot, request);
    case Operation::kConnect: return Answer::allow();
  }
  return Answer::allow();
}

runtime::admission::Validator gpuDeviceWebhook(const SnapshotCell<state::Snapshot>& cell,
                                               GpuDeviceWebhookOptions options) {
  return {[&cell, options = std::move(options)](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuDevice(*snapshot, request, options);
  }};
}

}  // namespace tally::controller
