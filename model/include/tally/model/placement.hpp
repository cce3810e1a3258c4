#pragma once
// Held devices after admission (SPEC 2.1, 3.6, 5): where the device binder
// places an admitted GPUDevice, when a placed one is Lost, and when a Lost one
// holds its units again. The webhook's checks (checkDeviceOrder) run again at
// placement, on the cluster as it is then: orders admitted by two replicas at
// once may together overrun a pool or a budget, and only the binder, one at a
// time, can tell which of them get it.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

// A CapacityView over `base` that also counts the placements a binder wrote
// but the cluster it decides on does not show yet (its watch is behind its own
// writes): each holds `count` units of its class on its node, as a Bound
// device does. Without it, two placements in a row could both take the same
// free units. `cluster` and `base` must outlive the view.
class HeldAheadView final : public CapacityView {
 public:
  HeldAheadView(const Cluster& cluster, const CapacityView& base);

  // `device` holds its units on `node` (ignored when its class is unknown).
  void hold(const GpuDevice& device, std::string_view node);
  // Whether hold() was called for the device, and the node it was given.
  bool holds(std::string_view ns, std::string_view name) const { return nodeOf(ns, name) != nullptr; }
  const std::string* nodeOf(std::string_view ns, std::string_view name) const;
  std::size_t size() const { return held_.size(); }

  std::int64_t nodeUsed(std::string_view node, std::string_view resource) const override;
  std::int64_t nodeHeld(std::string_view node, std::string_view resource) const override;
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override;
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override;
  bool counts(const Pod& pod) const override;
  std::int64_t subtreePlaced(std::string_view ns, std::string_view resource) const override;
  std::int64_t poolFreeUnits(const Cluster& cluster, const DeviceClass& pool) const override;
  std::optional<ResourceList> claimAsks(const ClusterObjects& cluster, std::string_view key) const override {
    return base_.claimAsks(cluster, key);
  }

 private:
  const Cluster& cluster_;
  const CapacityView& base_;
  std::map<std::string, std::string, std::less<>> held_;           // "ns/name" -> node
  std::map<std::string, ResourceList, std::less<>> nodeAhead_;     // node -> resource -> units
  std::map<std::string, ResourceList, std::less<>> subtreeAhead_;  // namespace -> resource -> units
};

// Where the binder places a Pending GPUDevice: checkDeviceOrder and
// placeDeviceSet on the cluster as it is now, with budgets counted in order of
// arrival: the device itself and the Pending devices created after it (then by
// namespace/name) are left out of its budgets, so when racing orders overrun a
// budget the earliest are placed and the later ones wait, the budget named.
// Devices `view` holds ahead count as placed.
Placement placeHeldDevice(const Cluster& cluster, const HeldAheadView& view, const GpuDevice& device);

// The devices that go to one node with `device`: the set its attachment names
// (status.attachedTo.set, written by the VM door before the VMI exists), else
// those a VirtualMachineInstance
// of its namespace names in gpu.tally.dev/devices beside it (the first such
// VMI by name; in any phase: a stopped VM still needs its set whole), itself
// included, in the VMI's order; only `device` when no VMI names it. Names the
// cluster holds no device for are `missing`: the set is not placed until they
// exist (placing part of it could leave no node for the rest).
struct DeviceSet {
  std::vector<const GpuDevice*> members;
  std::vector<std::string> missing;
  std::string vmi;  // "ns/name", empty for a lone device
};
DeviceSet deviceSetOf(const Cluster& cluster, const GpuDevice& device);

// Where the binder places the Pending members of a set (SPEC 3.6: one node
// holds the whole set): on the node its placed members hold (or are held
// ahead on), which must have room for all its Pending members; when none is
// placed, by placeDeviceSet for all of them at once. The order's checks and
// budgets as placeHeldDevice, the set arriving with its earliest Pending
// member. A set already split across nodes is refused (DeviceUnavailable), one
// with missing members waits (DeviceUnknown).
Placement placeHeldSet(const Cluster& cluster, const HeldAheadView& view, const DeviceSet& set);

// Why a Bound or Attached device no longer holds its units: its node is gone
// (NodeGone), or the node no longer advertises the devices, in the class's
// node mode, for every device it holds (DeviceUnavailable: the devices placed
// last, by creation then name, lose first). Readiness and cordon do not count:
// a NotReady or drained node still has the GPUs. Nothing when it still holds.
std::optional<Refusal> holdLost(const Cluster& cluster, const GpuDevice& device);

// Whether a Lost device can hold its units again: its node is back, eligible,
// and serves `count` free units of its class. Refused with the node, the free
// units and the count otherwise.
Decision checkRecovery(const Cluster& cluster, const CapacityView& view, const GpuDevice& device);

}  // namespace tally::model
