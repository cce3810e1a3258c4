#include "tally/controller/pod_webhooks.hpp"

#include "refusals.hpp"

#include <optional>
#include <string>
#include <vector>

#include "tally/codec/admission_objects.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/pod_admission.hpp"
#include "tally/model/usage.hpp"

namespace tally::controller {
namespace {

using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::JsonPatch;
using runtime::admission::Operation;

using codec::readRequiredAffinity;
using codec::RequiredAffinity;

using detail::answerOf;
using detail::codeName;
using detail::forbidden;
using detail::invalid;
using detail::refusedBy;
using runtime::admission::Answer;

std::string podSubject(const model::Pod& pod) {
  return "pod/" + pod.ns + "/" + (pod.name.empty() ? std::string("(generated name)") : pod.name);
}

Answer notSynced(const state::Snapshot& snapshot, const model::Pod& pod, std::string_view why) {
  return forbidden(codeName(model::Code::CacheNotSynced), "[CacheNotSynced] " + podSubject(pod) +
                                                              " refused: " + snapshot.unsyncedCaches() + ", so " +
                                                              std::string(why) + " (this replica is still starting)");
}

using DecodedPod = codec::AdmittedObject<model::Pod>;

// A pod created by generateName carries no name yet: accepted so.
DecodedPod decodePod(const AdmissionRequest& request) {
  return codec::decodeAdmittedPod(request.object, request.namespace_, request.name,
                                  {.allowGenerateName = request.name.empty()});
}

// Only a Pod's own CREATE is reviewed: a subresource (binding, eviction) or
// another operation is no new pod.
bool reviewed(const AdmissionRequest& request) {
  return request.operation == Operation::kCreate && request.subResource.empty();
}

std::optional<Answer> wrongKind(const AdmissionRequest& request) {
  if (request.kind.group.empty() && request.kind.kind == "Pod") return std::nullopt;
  return invalid("WrongKind", "this webhook reviews core Pods, not " + request.kind.group + "/" + request.kind.kind);
}

// The JSON Patch of the codec's edits (codec::nodePinEdits and the route's).
JsonPatch patchOf(const std::vector<codec::PatchEdit>& edits) {
  JsonPatch patch;
  for (const auto& e : edits) {
    if (e.op == codec::PatchEdit::Op::kRemove) {
      patch.remove(e.path);
    } else {
      patch.add(e.path, e.valueJson);
    }
  }
  return patch;
}

Answer decideLauncher(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  if (!reviewed(request)) return Answer::allow();
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  DecodedPod decoded = decodePod(request);
  if (!decoded.error.empty()) return invalid("Unreadable", decoded.error);
  const model::Pod& pod = decoded.value;
  if (!model::namesVmiOwner(pod)) return Answer::allow();
  if (!snapshot.ready()) return notSynced(snapshot, pod, "the node of its VMI's GPUs cannot be known");
  model::LauncherPin pin = model::launcherPin(snapshot.cluster(), pod);
  if (!pin.decision.allowed()) return refusedBy(pin.decision);
  if (!pin.node) return Answer::allow();
  RequiredAffinity affinity = readRequiredAffinity(request.object, *pin.node);
  if (!affinity.error.empty()) return invalid("Unreadable", affinity.error);
  return Answer::patch(patchOf(codec::nodePinEdits(affinity, *pin.node)));
}

// What makes a created pod one of Tally's: a GPU resource some class sells,
// or ResourceClaims while some class is a DRA pool (model::claimPodDecided).
// Without an extended resource or a claim no class can make it one, so even a
// replica still starting knows it is none of Tally's. Nullopt: a GPU pod
// (decoded into `decoded`); an answer: allowed as none of Tally's, or refused.
std::optional<Answer> notAGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request, DecodedPod& decoded,
                                 std::string_view unsyncedWhy) {
  if (!reviewed(request)) return Answer::allow();
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  decoded = decodePod(request);
  if (!decoded.error.empty()) return invalid("Unreadable", decoded.error);
  const model::Pod& pod = decoded.value;
  if (model::effectiveRequests(pod).empty() && pod.claims.empty()) return Answer::allow();
  if (!snapshot.ready()) return notSynced(snapshot, pod, unsyncedWhy);
  if (model::gpuRequests(snapshot.cluster(), pod).empty() && !model::claimPodDecided(snapshot.cluster(), pod)) {
    return Answer::allow();
  }
  return std::nullopt;
}

Answer decideGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                    const model::PlacementPolicy& policy) {
  DecodedPod decoded;
  if (auto answer = notAGpuPod(snapshot, request, decoded, "its GPU budgets and pool gates cannot be checked")) {
    return std::move(*answer);
  }
  return answerOf(model::checkGpuPodAtCreate(snapshot.cluster(), snapshot.usage, decoded.value, policy));
}

// The mutating placement door: every GPU pod to a Tally scheduler profile, a
// node given at creation checked by the node filter and moved into a required
// node affinity, so the extender places it with its other placements.
Answer routeGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                   const model::PlacementPolicy& policy) {
  DecodedPod decoded;
  if (auto answer = notAGpuPod(snapshot, request, decoded, "where its GPU units are free cannot be checked")) {
    return std::move(*answer);
  }
  const model::Pod& pod = decoded.value;
  model::CreateLaunch launch = model::launchAtCreate(snapshot.cluster(), pod);
  if (!launch.decision.allowed()) return refusedBy(launch.decision);
  const model::PodDemand demand = model::podDemandAtCreate(snapshot.cluster(), snapshot.usage, pod, launch);
  model::CreateRoute route = model::routeAtCreate(snapshot.cluster(), snapshot.usage, demand, policy);
  if (!route.decision.allowed()) return refusedBy(route.decision);
  std::vector<codec::PatchEdit> edits;
  if (route.pinnedNode) {
    RequiredAffinity affinity = readRequiredAffinity(request.object, *route.pinnedNode);
    if (!affinity.error.empty()) return invalid("Unreadable", affinity.error);
    edits = codec::nodePinEdits(affinity, *route.pinnedNode);
    edits.insert(edits.begin(), codec::nodeNameRemoval());
  }
  if (route.scheduler) edits.push_back(codec::schedulerNameEdit(*route.scheduler));
  if (route.claimMarker) {
    codec::ContainerResourceEdits marker =
        codec::firstContainerResourceEdits(request.object, model::kClaimPodMarker, "1");
    if (!marker.error.empty()) return invalid("Unreadable", marker.error);
    edits.insert(edits.end(), marker.edits.begin(), marker.edits.end());
  }
  return Answer::patch(patchOf(edits));
}

// A patched answer counted in `counter` (pinned, routed) when there is one.
Answer countedPatch(Answer answer, observability::Counter* counter) {
  if (counter && !answer.response.patch.empty()) counter->inc();
  return answer;
}

}  // namespace

observability::Counter& launcherPinnedMetric(observability::Registry& registry) {
  return registry
      .counter("tally_controller_launcher_pods_pinned_total",
               "Launcher pods given a required node affinity to the node of their VMI's GPUs.")
      .with({});
}

observability::Counter& gpuPodRoutedMetric(observability::Registry& registry) {
  return registry
      .counter("tally_controller_gpu_pods_routed_total",
               "GPU pods pointed at a Tally scheduler profile, or whose spec.nodeName was moved into a required "
               "node affinity, at their creation.")
      .with({});
}

PodWebhookOptions podWebhookMetrics(observability::Registry& registry) {
  PodWebhookOptions options;
  options.pinned = &launcherPinnedMetric(registry);
  options.routed = &gpuPodRoutedMetric(registry);
  return options;
}

Answer reviewLauncherPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                         const PodWebhookOptions& options) {
  return countedPatch(decideLauncher(snapshot, request), options.pinned);
}

Answer reviewGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                    const PodWebhookOptions& options) {
  return decideGpuPod(snapshot, request, options.placement);
}

Answer reviewGpuPodRoute(const state::Snapshot& snapshot, const AdmissionRequest& request,
                         const PodWebhookOptions& options) {
  return countedPatch(routeGpuPod(snapshot, request, options.placement), options.routed);
}

runtime::admission::Mutator launcherPodWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options) {
  return {[&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewLauncherPod(*snapshot, request, options);
  }};
}

runtime::admission::Validator gpuPodWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options) {
  return {[&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuPod(*snapshot, request, options);
  }};
}

runtime::admission::Mutator gpuPodRouteWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options) {
  return {[&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuPodRoute(*snapshot, request, options);
  }};
}

}  // namespace tally::controller
