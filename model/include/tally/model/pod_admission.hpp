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
inline constexpr std::string_view kKubevirtApiVersionPrefix = "kubevirt.io/";

// The pod's owner references to KubeVirt's VirtualMachineInstance: kind
// VirtualMachineInstance in the kubevirt.io group (virt-launcher pods carry
// one). A reference of that kind in another group (x.io/v1) names no VMI Tally
// knows, so it is no owner here. None proves coverage by itself: at CREATE the
// VMI must exist with the reference's uid (launchAtCreate), after it only
// status.activePods makes a launcher (launchOf).
bool isVmiOwner(const OwnerReference& owner);
std::vector<const OwnerReference*> vmiOwners(const Pod& pod);
inline bool namesVmiOwner(const Pod& pod) { return !vmiOwners(pod).empty(); }

// The launch a pod's owner reference proves at its CREATE, when no VMI can list
// the pod in status.activePods yet (it has no uid): the VMI of the pod's
// namespace with the reference's uid, in a phase that still runs, and the
// devices attachable to it. The pod doors charge the pod's GPUs beyond those
// devices' coverage as a raw pod's; a pod that names a VMI it does not belong
// to gains at most that coverage at CREATE, and the extender, which asks
// status.activePods, places it as a raw pod.
//   no VMI owner: no launch (a raw pod);
//   the VMI or device cache not synced, or an owner VMI not seen: refused
//   (not seen is not absent; the creator retries);
//   owners naming two VMIs, or a VMI that has ended: no launch.
struct CreateLaunch {
  Launch launch;
  Decision decision;
};
CreateLaunch launchAtCreate(const Cluster& cluster, const Pod& pod);

// The demand of a pod at its CREATE: podDemandWith the launch its owner proves.
PodDemand podDemandAtCreate(const Cluster& cluster, const CapacityView& view, const Pod& pod,
                            const CreateLaunch& launch);

// --- Placement: no GPU unit reaches a node without Tally's decision ---------
//
// A GPU pod runs where Tally decided: a kube-scheduler profile whose extender
// is tally-extender places it (the extender's filter and bind, serialised by
// its assumptions), or nothing does. spec.schedulerName is immutable after
// CREATE, so the pod doors decide it there: the mutating door points every GPU
// pod at the first Tally profile and turns a spec.nodeName given at creation
// into a required node affinity to that node (after the node filter admitted
// the pod there, so a full node is refused at once with its free units); the
// validating door, which sees the pod after every mutation, refuses a GPU pod
// that still names another scheduler, and runs the node filter on a node
// still preset (a later mutator's, or a cluster without the mutating door).
struct PlacementPolicy {
  // Profiles whose kube-scheduler calls tally-extender; the first is the one
  // the mutating door sets. Empty: every GPU pod without a node is refused.
  std::vector<std::string> schedulers{"tally-scheduler"};
};

// The mutating door's answer for a GPU pod at CREATE.
struct CreateRoute {
  Decision decision;                      // refused: the preset node cannot take the pod
  std::optional<std::string> scheduler;   // set: spec.schedulerName becomes it
  std::optional<std::string> pinnedNode;  // set: spec.nodeName moves into a required affinity to it
  // A pod naming ResourceClaims that needs kClaimPodMarker (needsClaimMarker)
  // and lacks it: the door adds it, so kube-scheduler asks tally-extender.
  bool claimMarker = false;
};
CreateRoute routeAtCreate(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                          const PlacementPolicy& policy);

// The node filter on a node the pod names in spec.nodeName: the node's verdict
// (free units, mode, cordon, launcher pin), naming the node; refused when the
// node is unknown to this snapshot. Budgets and gates are not repeated here.
Decision checkPresetNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                         std::string_view node);

// The validating door's placement check: a preset node by checkPresetNode, else
// a scheduler name among the policy's (SchedulerBypass otherwise), and for a
// pod naming ResourceClaims (claimPodDecided) the marker that makes that
// scheduler ask tally-extender about it (kClaimPodMarker in dra.hpp).
Decision checkPlacedByTally(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                            const PlacementPolicy& policy);

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

// A GPU pod at its creation (raw or a launcher), after every mutation: the
// owner it names proven (launchAtCreate), its budgets beyond its VMI's device
// coverage, the creation gates of its pools, and where it may be placed
// (checkPlacedByTally).
Decision checkGpuPodAtCreate(const Cluster& cluster, const CapacityView& view, const Pod& pod,
                             const PlacementPolicy& policy);

}  // namespace tally::model
