#pragma once
// Admission and placement decisions (SPEC 3.6), and the per-node filter and
// score the extender runs. Each refusal names object, quantity and limit.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"
#include "tally/model/refusal.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

// A device order: one GPUDevice create, or the device set of one VMI.
struct DeviceOrder {
  std::string ns;
  std::string subject;  // "gpudevice/ns/name" or "vmi/ns/name", for messages
  std::vector<DeviceTemplate> items;
};

// Every refusal check of an order, none of which writes anything: unknown or
// deleting class, count above maxCount, pool free units, no single node for the
// whole set, budgets of the tenant and its ancestors, entitlement, closed gate.
Decision checkDeviceOrder(const Cluster& cluster, const CapacityView& view, const DeviceOrder& order);

// The VMI a held device serves while it runs: the one its status.attachedTo
// names (by uid when both carry one), or one naming it in its
// gpu.tally.dev/devices annotation, in any phase but Succeeded or Failed (a
// VMI still starting is about to use it). Null when none does.
const VirtualMachineInstance* runningHolder(const Cluster& cluster, const GpuDevice& device);

// Deletion of a held device: refused while a running VMI holds it (naming the
// VMI), and closed while the VMI cache is not synced.
Decision checkDeviceDeletion(const Cluster& cluster, const GpuDevice& device);

// Placement of a device set: exactly one node holds the whole set. Chooses
// deterministically: best fit (least free left), preferring nodes already in
// use so whole nodes stay free, then by name. Never places on capacity that
// backs idle reservations of other organizations.
struct Placement {
  std::optional<std::string> node;
  Decision decision;
};
Placement placeDeviceSet(const Cluster& cluster, const CapacityView& view, const DeviceOrder& order);

// An add-on change on an Organization. A reduction is refused while HRQ
// status usage or named holders would exceed the new hard quota, and while a
// reservation add-on's grant would fall below what the organization's pending
// and active ledger records naming it reserve (naming the records and the
// release procedure). An increase is refused in a pool closed by a failed
// audit, during another reservation transaction there, and when it would
// break (or make unknown) the pool's invariant.
Decision checkAddonChange(const Cluster& cluster, const CapacityView& view, const Organization& before,
                          const Organization& after);

// An Organization created with add-ons: decided exactly as an UPDATE adding
// them to an organization that held none.
Decision checkOrganizationCreate(const Cluster& cluster, const CapacityView& view, const Organization& created);

// Holders of a quota key in an organization's subtree, named ("pod/ns/name: 2").
std::vector<std::string> holdersOf(const Cluster& cluster, std::string_view orgNamespace, std::string_view key);

// --- Pods (extender and raw-pod webhook) -----------------------------------

enum class Verdict { Fits, Unschedulable, Unresolvable };

struct NodeVerdict {
  Verdict verdict = Verdict::Fits;
  std::optional<Refusal> reason;
};

// What one pod asks for, worked out once per request.
struct PodDemand {
  const Pod* pod = nullptr;
  ResourceList budget;  // by quota key, after budget coverage
  const VirtualMachineInstance* launcherOf = nullptr;
  std::string requiredNode;  // a launcher goes only where its devices are
  const Organization* organization = nullptr;
  ResourceList requests;                              // effective GPU requests, its claims' units included
  ResourceList claimUnits;                            // of requests: what its ResourceClaims still ask (podClaimUnits)
  std::vector<const GpuDevice*> attached;             // devices of its VMI (launchers only)
  std::map<std::string, std::int64_t> poolAvailable;  // class -> pool free minus others' idle reservations
  std::vector<Refusal> podWide;                       // refusals that hold on every node (resolvable)
  std::vector<Refusal> podUnresolvable;               // refusals no node can resolve
};

// Builds the demand of a pod: effective requests, launcher detection through
// status.activePods, coverage, budgets of the namespace chain, pool gates, and
// the units its ResourceClaims still ask of Tally's pools (podClaimUnits in
// dra.hpp: node units and pool gates, not budgets, which charged the claims at
// their creation); a claim not made or not seen yet refuses it (ClaimNotSeen,
// the scheduler retries).
PodDemand podDemand(const Cluster& cluster, const CapacityView& view, const Pod& pod);
// The same with the launch given instead of found through status.activePods:
// at a pod's CREATE no VMI lists it yet, so the pod doors pass the launch its
// owner reference proves (launchAtCreate in pod_admission.hpp).
PodDemand podDemandWith(const Cluster& cluster, const CapacityView& view, const Pod& pod, Launch launch);

// The filter of one node for a pod: node mode and pool gate (unresolvable), free
// units after held devices, assumptions and idle reservations of other
// organizations, launcher pinning, budgets.
NodeVerdict filterNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand, const Node& node);

enum class ScoreStrategy { BinPack, Spread };
// 0..10: bin-pack by default (fewest free units left), spread by choice;
// penalises breaking up whole free devices/nodes and nodes whose free capacity
// backs idle reservations.
int scoreNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand, const Node& node,
              ScoreStrategy strategy);

// Preemption: keeps only victims (in the order given) whose eviction is needed
// to make the pod fit on the node by the model; nothing when even evicting every
// candidate would not make it fit (the node is then no preemption target).
std::optional<std::vector<const Pod*>> narrowVictims(const Cluster& cluster, const CapacityView& view,
                                                     const PodDemand& demand, const Node& node,
                                                     const std::vector<const Pod*>& candidates);

// Budget check of a raw GPU pod (the validating pod webhook).
Decision checkPodBudget(const Cluster& cluster, const CapacityView& view, const Pod& pod);
// The budget refusals of a demand already built (what checkPodBudget returns).
Decision budgetRefusals(const PodDemand& demand);

}  // namespace tally::model
