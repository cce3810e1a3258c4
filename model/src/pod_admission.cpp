#include "tally/model/pod_admission.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lookup.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/usage.hpp"
#include "tally/model/vmi.hpp"

namespace tally::model {
namespace {

std::string podSubject(const Pod& pod) {
  return fmt::format("pod {}/{}", pod.ns, pod.name.empty() ? std::string("(generated name)") : pod.name);
}

const VirtualMachineInstance* vmiWithUid(const Cluster& cluster, std::string_view ns, std::string_view uid) {
  if (uid.empty()) return nullptr;
  auto [first, last] = detail::namespacedRange(cluster.vmis, ns);
  for (auto it = first; it != last; ++it) {
    if (it->second.uid == uid) return &it->second;
  }
  return nullptr;
}

}  // namespace

std::vector<const OwnerReference*> vmiOwners(const Pod& pod) {
  std::vector<const OwnerReference*> out;
  for (const auto& owner : pod.owners) {
    if (owner.kind == kVmiOwnerKind) out.push_back(&owner);
  }
  return out;
}

LauncherPin launcherPin(const Cluster& cluster, const Pod& pod) {
  LauncherPin pin;
  const std::vector<const OwnerReference*> owners = vmiOwners(pod);
  if (owners.empty()) return pin;
  for (Kind kind : {Kind::VirtualMachineInstance, Kind::GpuDevice}) {
    if (!cluster.synced(kind)) {
      pin.decision.refuse(Code::CacheNotSynced, fmt::format("{} names a VMI as its owner, but the {} cache is not "
                                                            "synced yet, so its devices' node is unknown",
                                                            podSubject(pod), toString(kind)));
      return pin;
    }
  }
  for (const OwnerReference* owner : owners) {
    const VirtualMachineInstance* vmi = vmiWithUid(cluster, pod.ns, owner->uid);
    if (!vmi) {
      // The informer of this replica lags the VMI's creation: not seen is not absent.
      pin.decision.refuse(Code::CacheNotSynced,
                          fmt::format("{} is owned by vmi/{}/{} (uid {}), which this replica has not seen yet, so "
                                      "where its GPUs are is unknown; the pod's creator retries",
                                      podSubject(pod), pod.ns, owner->name, owner->uid));
      return pin;
    }
    if (attachedDevices(cluster, *vmi).empty()) continue;
    SetNode set = attachedNode(cluster, *vmi);
    if (!set.decision.allowed() || !set.node) {
      pin.decision = std::move(set.decision);
      pin.node.reset();
      return pin;
    }
    if (pin.node && *pin.node != *set.node) {
      pin.decision.refuse(
          Code::DeviceUnavailable,
          fmt::format("{} is owned by VMIs whose GPUs are held on nodes {} and {}; it cannot run on both",
                      podSubject(pod), *pin.node, *set.node));
      pin.node.reset();
      return pin;
    }
    pin.node = set.node;
  }
  return pin;
}

Decision checkPodGates(const Cluster& cluster, const PodDemand& demand) {
  Decision d;
  const Pod& pod = *demand.pod;
  for (const auto& [resource, amount] : demand.requests) {
    const std::int64_t need = amount - budgetCoverage(demand.attached, cluster, resource);
    if (need <= 0) continue;
    const std::vector<const DeviceClass*> pools = classesFor(cluster, resource);
    const bool anyOpen = std::any_of(pools.begin(), pools.end(), [](const DeviceClass* c) { return c->gateOpen; });
    if (pools.empty() || anyOpen) continue;
    for (const DeviceClass* pool : pools) {
      d.refuse(Code::GateClosed,
               fmt::format("{} asks for {} {}, but {}", podSubject(pod), need, resource, gateClosedMessage(*pool)));
    }
  }
  return d;
}

Decision checkRawGpuPod(const Cluster& cluster, const CapacityView& view, const Pod& pod) {
  Decision d = checkPodBudget(cluster, view, pod);
  Decision gates = checkPodGates(cluster, podDemand(cluster, view, pod));
  for (auto& r : gates.refusals) d.refusals.push_back(std::move(r));
  return d;
}

}  // namespace tally::model
