#include "tally/controller/pod_webhooks.hpp"

#include "refusals.hpp"

#include <simdjson.h>

#include <optional>
#include <string>
#include <vector>

#include "tally/codec/admission_objects.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/model/pod_admission.hpp"
#include "tally/model/usage.hpp"

namespace tally::controller {
namespace {

using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::JsonPatch;
using runtime::admission::Operation;

constexpr std::string_view kRequired = codec::kRequiredNodeAffinity;
using codec::readRequiredAffinity;
using codec::RequiredAffinity;
using codec::withPlaceholderName;

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

struct DecodedPod {
  model::Pod pod;
  std::string error;  // set: the pod could not be read
};

DecodedPod decodePod(const AdmissionRequest& request) {
  DecodedPod out;
  const std::string_view json(request.object.data(), request.object.size());
  auto decoded = codec::decodeText<codec::PodCodec>(json);
  bool generated = false;
  if (!decoded && request.name.empty()) {
    if (auto named = withPlaceholderName(request.object)) {
      auto retried = codec::decodeText<codec::PodCodec>(*named);
      if (retried) {
        decoded = std::move(retried);
        generated = true;
      }
    }
  }
  if (!decoded) {
    out.error = "the created Pod cannot be read: " + decoded.error().describe();
    return out;
  }
  out.pod = std::move(decoded).value();
  if (generated) out.pod.name.clear();
  if (out.pod.ns.empty()) out.pod.ns = request.namespace_;
  if (out.pod.name.empty()) out.pod.name = request.name;
  return out;
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

// The JSON Patch that makes every term require the node (none when each does).
// A term that matches no node is left so: pinning it would let the pod run
// where its own affinity never allowed it.
JsonPatch pinPatch(const RequiredAffinity& affinity, std::string_view node) {
  const std::string expression = R"({"key":"metadata.name","operator":"In","values":[)" + jsonString(node) + "]}";
  const std::string term = R"({"matchFields":[)" + expression + "]}";
  const std::string terms = R"({"nodeSelectorTerms":[)" + term + "]}";
  const std::string required = "{" + jsonString(kRequired) + ":" + terms + "}";
  JsonPatch patch;
  using Missing = RequiredAffinity::Missing;
  switch (affinity.missing) {
    case Missing::Affinity:
      patch.add(JsonPatch::pointer({"spec", "affinity"}), R"({"nodeAffinity":)" + required + "}");
      return patch;
    case Missing::NodeAffinity:
      patch.add(JsonPatch::pointer({"spec", "affinity", "nodeAffinity"}), required);
      return patch;
    case Missing::Required:
      patch.add(JsonPatch::pointer({"spec", "affinity", "nodeAffinity", kRequired}), terms);
      return patch;
    case Missing::Terms:
      patch.add(JsonPatch::pointer({"spec", "affinity", "nodeAffinity", kRequired, "nodeSelectorTerms"}),
                "[" + term + "]");
      return patch;
    case Missing::Nothing: break;
  }
  const std::string termsPath =
      JsonPatch::pointer({"spec", "affinity", "nodeAffinity", kRequired, "nodeSelectorTerms"});
  if (affinity.terms.empty()) {
    patch.add(termsPath + "/-", term);
    return patch;
  }
  for (std::size_t i = 0; i < affinity.terms.size(); ++i) {
    const RequiredAffinity::Term& t = affinity.terms[i];
    if (t.empty || t.pinned) continue;
    const std::string path = termsPath + "/" + std::to_string(i) + "/matchFields";
    if (t.hasMatchFields) {
      patch.add(path + "/-", expression);
    } else {
      patch.add(path, "[" + expression + "]");
    }
  }
  return patch;
}

Answer decideLauncher(const state::Snapshot& snapshot, const AdmissionRequest& request) {
  if (!reviewed(request)) return Answer::allow();
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  DecodedPod decoded = decodePod(request);
  if (!decoded.error.empty()) return invalid("Unreadable", decoded.error);
  const model::Pod& pod = decoded.pod;
  if (!model::namesVmiOwner(pod)) return Answer::allow();
  if (!snapshot.ready()) return notSynced(snapshot, pod, "the node of its VMI's GPUs cannot be known");
  model::LauncherPin pin = model::launcherPin(snapshot.cluster(), pod);
  if (!pin.decision.allowed()) return refusedBy(pin.decision);
  if (!pin.node) return Answer::allow();
  RequiredAffinity affinity = readRequiredAffinity(request.object, *pin.node);
  if (!affinity.error.empty()) return invalid("Unreadable", affinity.error);
  JsonPatch patch = pinPatch(affinity, *pin.node);
  return Answer::patch(std::move(patch));
}

// What makes a created pod one of Tally's: a GPU resource some class sells.
// Without an extended resource no class can make it one, so even a replica
// still starting knows it is none of Tally's. Nullopt: a GPU pod (decoded into
// `decoded`); an answer: allowed as none of Tally's, or refused.
std::optional<Answer> notAGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request, DecodedPod& decoded,
                                 std::string_view unsyncedWhy) {
  if (!reviewed(request)) return Answer::allow();
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  decoded = decodePod(request);
  if (!decoded.error.empty()) return invalid("Unreadable", decoded.error);
  if (model::effectiveRequests(decoded.pod).empty()) return Answer::allow();
  if (!snapshot.ready()) return notSynced(snapshot, decoded.pod, unsyncedWhy);
  if (model::gpuRequests(snapshot.cluster(), decoded.pod).empty()) return Answer::allow();
  return std::nullopt;
}

Answer decideGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                    const model::PlacementPolicy& policy) {
  DecodedPod decoded;
  if (auto answer = notAGpuPod(snapshot, request, decoded, "its GPU budgets and pool gates cannot be checked")) {
    return std::move(*answer);
  }
  return answerOf(model::checkGpuPodAtCreate(snapshot.cluster(), snapshot.usage, decoded.pod, policy));
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
  const model::Pod& pod = decoded.pod;
  model::CreateLaunch launch = model::launchAtCreate(snapshot.cluster(), pod);
  if (!launch.decision.allowed()) return refusedBy(launch.decision);
  const model::PodDemand demand = model::podDemandAtCreate(snapshot.cluster(), snapshot.usage, pod, launch);
  model::CreateRoute route = model::routeAtCreate(snapshot.cluster(), snapshot.usage, demand, policy);
  if (!route.decision.allowed()) return refusedBy(route.decision);
  JsonPatch patch;
  if (route.pinnedNode) {
    RequiredAffinity affinity = readRequiredAffinity(request.object, *route.pinnedNode);
    if (!affinity.error.empty()) return invalid("Unreadable", affinity.error);
    patch.remove(JsonPatch::pointer({"spec", "nodeName"}));
    const JsonPatch pin = pinPatch(affinity, *route.pinnedNode);
    for (const auto& op : pin.operations()) patch.add(op.path, op.valueJson);
  }
  if (route.scheduler) patch.add(JsonPatch::pointer({"spec", "schedulerName"}), jsonString(*route.scheduler));
  return Answer::patch(std::move(patch));
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
