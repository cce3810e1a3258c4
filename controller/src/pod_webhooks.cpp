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

// An answer and the reason codes it refuses for (for the refusal metric).
struct Answer {
  AdmissionResponse response;
  std::vector<std::string> codes;
  bool pinned = false;
  bool routed = false;
  Answer(AdmissionResponse r, std::string code = {}) : response(std::move(r)) {
    if (!code.empty()) codes.push_back(std::move(code));
  }
};

using detail::forbidden;
using detail::invalid;

// "[BudgetExceeded] ...; [GateClosed] ..."
Answer refusedBy(const model::Decision& decision) {
  Answer a(forbidden(detail::describe(decision)));
  for (const auto& r : decision.refusals) a.codes.emplace_back(model::toString(r.code));
  return a;
}

std::string podSubject(const model::Pod& pod) {
  return "pod/" + pod.ns + "/" + (pod.name.empty() ? std::string("(generated name)") : pod.name);
}

Answer notSynced(const state::Snapshot& snapshot, const model::Pod& pod, std::string_view why) {
  return {forbidden("[CacheNotSynced] " + podSubject(pod) + " refused: " + snapshot.unsyncedCaches() + ", so " +
                    std::string(why) + " (this replica is still starting)"),
          std::string(model::toString(model::Code::CacheNotSynced))};
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
  return Answer(invalid("this webhook reviews core Pods, not " + request.kind.group + "/" + request.kind.kind),
                "WrongKind");
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
  if (!reviewed(request)) return AdmissionResponse::allow();
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  DecodedPod decoded = decodePod(request);
  if (!decoded.error.empty()) return {invalid(decoded.error), "Unreadable"};
  const model::Pod& pod = decoded.pod;
  if (!model::namesVmiOwner(pod)) return AdmissionResponse::allow();
  if (!snapshot.ready()) return notSynced(snapshot, pod, "the node of its VMI's GPUs cannot be known");
  model::LauncherPin pin = model::launcherPin(snapshot.cluster(), pod);
  if (!pin.decision.allowed()) return refusedBy(pin.decision);
  if (!pin.node) return AdmissionResponse::allow();
  RequiredAffinity affinity = readRequiredAffinity(request.object, *pin.node);
  if (!affinity.error.empty()) return {invalid(affinity.error), "Unreadable"};
  JsonPatch patch = pinPatch(affinity, *pin.node);
  if (patch.empty()) return AdmissionResponse::allow();
  Answer answer(AdmissionResponse::mutate(std::move(patch)));
  answer.pinned = true;
  return answer;
}

// What makes a created pod one of Tally's: a GPU resource some class sells.
// Without an extended resource no class can make it one, so even a replica
// still starting knows it is none of Tally's. Nullopt: a GPU pod (decoded into
// `decoded`); an answer: allowed as none of Tally's, or refused.
std::optional<Answer> notAGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request, DecodedPod& decoded,
                                 std::string_view unsyncedWhy) {
  if (!reviewed(request)) return Answer(AdmissionResponse::allow());
  if (auto wrong = wrongKind(request)) return std::move(*wrong);
  decoded = decodePod(request);
  if (!decoded.error.empty()) return Answer(invalid(decoded.error), "Unreadable");
  if (model::effectiveRequests(decoded.pod).empty()) return Answer(AdmissionResponse::allow());
  if (!snapshot.ready()) return notSynced(snapshot, decoded.pod, unsyncedWhy);
  if (model::gpuRequests(snapshot.cluster(), decoded.pod).empty()) return Answer(AdmissionResponse::allow());
  return std::nullopt;
}

Answer decideGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                    const model::PlacementPolicy& policy) {
  DecodedPod decoded;
  if (auto answer = notAGpuPod(snapshot, request, decoded, "its GPU budgets and pool gates cannot be checked")) {
    return std::move(*answer);
  }
  model::Decision decision = model::checkGpuPodAtCreate(snapshot.cluster(), snapshot.usage, decoded.pod, policy);
  if (decision.allowed()) return AdmissionResponse::allow();
  return refusedBy(decision);
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
    if (!affinity.error.empty()) return {invalid(affinity.error), "Unreadable"};
    patch.remove(JsonPatch::pointer({"spec", "nodeName"}));
    const JsonPatch pin = pinPatch(affinity, *route.pinnedNode);
    for (const auto& op : pin.operations()) patch.add(op.path, op.valueJson);
  }
  if (route.scheduler) patch.add(JsonPatch::pointer({"spec", "schedulerName"}), jsonString(*route.scheduler));
  if (patch.empty()) return AdmissionResponse::allow();
  Answer answer(AdmissionResponse::mutate(std::move(patch)));
  answer.routed = true;
  return answer;
}

AdmissionResponse counted(Answer answer, std::string_view webhook, const PodWebhookOptions& options) {
  if (options.refusals) {
    for (const auto& code : answer.codes) options.refusals->with({webhook, code}).inc();
  }
  if (answer.pinned && options.pinned) options.pinned->inc();
  if (answer.routed && options.routed) options.routed->inc();
  return std::move(answer.response);
}

}  // namespace

observability::Family<observability::Counter>& podRefusalMetric(observability::Registry& registry) {
  return registry.counter("tally_controller_pod_refusals_total",
                          "Pod admission refusals by webhook (launcher-pods, gpu-pods) and reason code.",
                          {"webhook", "code"});
}

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
  options.refusals = &podRefusalMetric(registry);
  options.pinned = &launcherPinnedMetric(registry);
  options.routed = &gpuPodRoutedMetric(registry);
  return options;
}

AdmissionResponse reviewLauncherPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                                    const PodWebhookOptions& options) {
  return counted(decideLauncher(snapshot, request), kLauncherPodWebhookName, options);
}

AdmissionResponse reviewGpuPod(const state::Snapshot& snapshot, const AdmissionRequest& request,
                               const PodWebhookOptions& options) {
  return counted(decideGpuPod(snapshot, request, options.placement), kGpuPodWebhookName, options);
}

AdmissionResponse reviewGpuPodRoute(const state::Snapshot& snapshot, const AdmissionRequest& request,
                                    const PodWebhookOptions& options) {
  return counted(routeGpuPod(snapshot, request, options.placement), kGpuPodRouteWebhookName, options);
}

runtime::admission::WebhookHandler launcherPodWebhook(const SnapshotCell<state::Snapshot>& cell,
                                                      PodWebhookOptions options) {
  return [&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewLauncherPod(*snapshot, request, options);
  };
}

runtime::admission::WebhookHandler gpuPodWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options) {
  return [&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuPod(*snapshot, request, options);
  };
}

runtime::admission::WebhookHandler gpuPodRouteWebhook(const SnapshotCell<state::Snapshot>& cell,
                                                      PodWebhookOptions options) {
  return [&cell, options](const AdmissionRequest& request) {
    auto snapshot = cell.read();
    return reviewGpuPodRoute(*snapshot, request, options);
  };
}

}  // namespace tally::controller
