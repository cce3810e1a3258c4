#pragma once
// The three Pod webhooks of the controller (SPEC 3.6, 5), each decided on this
// replica's snapshot alone and refused closed while a cache has not synced.
//
// Launcher pods (mutating): a pod created for a VMI whose Tally devices hold
// their units on one node gets a required node affinity to that node, on the
// pod itself, because LiveUpdate rewrites the VMI's affinity from the VM
// template. The pin is a matchFields expression on metadata.name added to
// every nodeSelectorTerm (terms are ORed); a term that carries it already is
// left alone, so a second call for the same pod patches nothing new.
//
// GPU pods (mutating, the placement door): a pod asking for a GPU resource of
// any class is pointed at a Tally scheduler profile, and a spec.nodeName given
// at creation is checked by the node filter (refused with the node's free
// units) and moved into a required node affinity, so that every GPU unit is
// placed by the extender (model::routeAtCreate).
//
// GPU pods (validating, after every mutation): a pod asking for a GPU resource
// is refused when a budget of its tenant or an ancestor would be exceeded
// beyond what the devices of the VMI its owner reference proves cover, every
// pool selling the resource has its creation gate closed, or it names another
// scheduler or a node the node filter refuses (model::checkGpuPodAtCreate).
// An owner reference is proven, never trusted: a kubevirt.io
// VirtualMachineInstance that exists with that uid (model::launchAtCreate).
//
// Neither writes anything, so a dry run gets the same answer and leaves no trace.

#include <string_view>

#include "tally/common/snapshot_cell.hpp"
#include "tally/model/pod_admission.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::controller {

inline constexpr std::string_view kLauncherPodWebhookPath = "/mutate/launcher-pods";
inline constexpr std::string_view kGpuPodWebhookPath = "/validate/gpu-pods";
inline constexpr std::string_view kGpuPodRouteWebhookPath = "/mutate/gpu-pods";
// The values of the frame's webhook label (tally_webhook_refusals_total{webhook}).
inline constexpr std::string_view kLauncherPodWebhookName = "launcher-pods";
inline constexpr std::string_view kGpuPodWebhookName = "gpu-pods";
inline constexpr std::string_view kGpuPodRouteWebhookName = "gpu-pod-routes";

struct PodWebhookOptions {
  // tally_controller_launcher_pods_pinned_total: launcher answers carrying a
  // pin patch (a second call that finds the pin in place adds none). Null: not counted.
  observability::Counter* pinned = nullptr;
  // tally_controller_gpu_pods_routed_total: GPU pods given a scheduler name or
  // whose preset node was moved into an affinity. Null: not counted.
  observability::Counter* routed = nullptr;
  // The scheduler profiles that ask tally-extender (--gpu-schedulers).
  model::PlacementPolicy placement;
};

// The counters the options expect, registered on `registry` (once; a second
// call returns them). Refusals are the frame's (tally_webhook_refusals_total).
observability::Counter& launcherPinnedMetric(observability::Registry& registry);
observability::Counter& gpuPodRoutedMetric(observability::Registry& registry);
// Both, for main.
PodWebhookOptions podWebhookMetrics(observability::Registry& registry);

// The answer to one review of a Pod by each webhook, decided on `snapshot` alone.
runtime::admission::Answer reviewLauncherPod(const state::Snapshot& snapshot,
                                             const runtime::admission::AdmissionRequest& request,
                                             const PodWebhookOptions& options);
runtime::admission::Answer reviewGpuPod(const state::Snapshot& snapshot,
                                        const runtime::admission::AdmissionRequest& request,
                                        const PodWebhookOptions& options);
runtime::admission::Answer reviewGpuPodRoute(const state::Snapshot& snapshot,
                                             const runtime::admission::AdmissionRequest& request,
                                             const PodWebhookOptions& options);

// The routes' frames: each review reads the newest snapshot of `cell`.
runtime::admission::Mutator launcherPodWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options);
runtime::admission::Validator gpuPodWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options);
runtime::admission::Mutator gpuPodRouteWebhook(const SnapshotCell<state::Snapshot>& cell, PodWebhookOptions options);

}  // namespace tally::controller
