#pragma once
// The two pod doors of the controller's webhooks (SPEC 3.6, 5): where a
// launcher pod must run, decided at its CREATE, and whether a raw GPU pod may
// be created at all (its budgets and the creation gates of its pools).

#include <optional>
#include <string>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

inline constexpr std::string_view kVmiOwnerKind = "VirtualMachineInstance";

// The pod's owner references of kind VirtualMachineInstance (KubeVirt's
// virt-launcher pods carry one). They prove nothing about coverage: only
// status.activePods makes a launcher (launchOf).
std::vector<const OwnerReference*> vmiOwners(const Pod& pod);
inline bool namesVmiOwner(const Pod& pod) { return !vmiOwners(pod).empty(); }

// The node a pod created for a VMI must be pinned to. At CREATE the pod has no
// uid and no VMI lists it in status.activePods yet, so the VMI is found by the
// owner reference's uid in the pod's namespace; that is safe here only because
// a pin narrows where the pod may run and never what it may use.
//   no VMI owner reference, or a VMI with no device attached: allowed, no node;
//   caches not synced, or an owner VMI not seen yet: refused (the creator retries);
//   attached devices not all placed on one node: refused with attachedNode's reason.
// Two VMI owners whose devices sit on different nodes are refused too.
struct LauncherPin {
  std::optional<std::string> node;  // set: a required node affinity to it
  Decision decision;
};
LauncherPin launcherPin(const Cluster& cluster, const Pod& pod);

// The creation gates of the pools a pod asks for: for each GPU resource it
// still needs after budget coverage, refused when every class selling it is
// closed (a node of an open class may still take it, as the filter decides).
Decision checkPodGates(const Cluster& cluster, const PodDemand& demand);

// A raw GPU pod at its creation: checkPodBudget and checkPodGates.
Decision checkRawGpuPod(const Cluster& cluster, const CapacityView& view, const Pod& pod);

}  // namespace tally::model
