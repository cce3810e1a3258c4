#include "tally/model/pod_admission.hpp"

#include "tally/model/dra.hpp"

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

// What a pod naming a VMI owner needs synced before its owner can be looked up.
std::optional<Refusal> ownerCachesUnsynced(const Cluster& cluster, const Pod& pod, std::string_view unknown) {
  for (Kind kind : {Kind::VirtualMachineInstance, Kind::GpuDevice}) {
    if (!cluster.synced(kind)) {
      return Refusal{Code::CacheNotSynced,
                     fmt::format("{} names a VMI as its owner, but the {} cache is not synced yet, so {} is unknown",
                                 podSubject(pod), toString(kind), unknown)};
    }
  }
  return std::nullopt;
}

}  // namespace

bool isVmiOwner(const OwnerReference& owner) {
  return owner.kind == kVmiOwnerKind && owner.apiVersion.starts_with(kKubevirtApiVersionPrefix);
}

std::vector<const OwnerReference*> vmiOwners(const Pod& pod) {
  std::vector<const OwnerReference*> out;
  for (const auto& owner : pod.owners) {
    if (isVmiOwner(owner)) out.push_back(&owner);
  }
  return out;
}

CreateLaunch launchAtCreate(const Cluster& cluster, const Pod& pod) {
  CreateLaunch out;
  const std::vector<const OwnerReference*> owners = vmiOwners(pod);
  if (owners.empty()) return out;
  if (auto unsynced = ownerCachesUnsynced(cluster, pod, "which devices cover its GPUs")) {
    out.decision.refusals.push_back(std::move(*unsynced));
    return out;
  }
  const VirtualMachineInstance* proven = nullptr;
  for (const OwnerReference* owner : owners) {
    const VirtualMachineInstance* vmi = vmiWithUid(cluster, pod.ns, owner->uid);
    if (!vmi) {
      out.decision.refuse(Code::CacheNotSynced,
                          fmt::format("{} is owned by vmi/{}/{} (uid {}), which this replica has not seen, so the "
                                      "owner cannot be proven; the pod's creator retries",
                                      podSubject(pod), pod.ns, owner->name, owner->uid.empty() ? "none" : owner->uid));
      return out;
    }
    if (proven && proven != vmi) return out;  // two VMIs: KubeVirt names one, so neither covers it
    proven = vmi;
  }
  if (proven->phase == "Succeeded" || proven->phase == "Failed") return out;
  out.launch.vmi = proven;
  auto [first, last] = detail::namespacedRange(cluster.devices, pod.ns);
  for (auto it = first; it != last; ++it) {
    if (attachableTo(it->second, *proven)) out.launch.devices.push_back(&it->second);
  }
  return out;
}

PodDemand podDemandAtCreate(const Cluster& cluster, const CapacityView& view, const Pod& pod,
                            const CreateLaunch& launch) {
  PodDemand demand = podDemandWith(cluster, view, pod, launch.launch);
  // A template's claims are made after the pod, and a named claim may be
  // created after it too: the extender waits for them, the door does not.
  std::erase_if(demand.podWide, [](const Refusal& r) { return r.code == Code::ClaimNotSeen; });
  return demand;
}

Decision checkPresetNode(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                         std::string_view node) {
  Decision d;
  const Pod& pod = *demand.pod;
  auto it = cluster.nodes.find(std::string(node));
  if (it == cluster.nodes.end()) {
    d.refuse(Code::NodeGone, fmt::format("{} names node {} in spec.nodeName, which this replica does not know, so its "
                                         "free GPU units cannot be checked",
                                         podSubject(pod), node));
    return d;
  }
  // Budgets and gates are the door's other checks: here only what the node decides.
  PodDemand onNode = demand;
  onNode.podWide.clear();
  onNode.podUnresolvable.clear();
  NodeVerdict verdict = filterNode(cluster, view, onNode, it->second);
  if (verdict.verdict == Verdict::Fits || !verdict.reason) return d;
  d.refuse(verdict.reason->code, fmt::format("{} names node {} in spec.nodeName, which cannot take it: {}",
                                             podSubject(pod), node, verdict.reason->message));
  return d;
}

Decision checkPlacedByTally(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                            const PlacementPolicy& policy) {
  const Pod& pod = *demand.pod;
  if (!pod.nodeName.empty()) return checkPresetNode(cluster, view, demand, pod.nodeName);
  const std::string scheduler = pod.schedulerName.empty() ? std::string("default-scheduler") : pod.schedulerName;
  Decision d;
  const bool claimPod = claimPodDecided(cluster, pod);
  const bool tallys =
      std::find(policy.schedulers.begin(), policy.schedulers.end(), scheduler) != policy.schedulers.end();
  if (tallys && needsClaimMarker(cluster, pod) && !carriesClaimMarker(pod)) {
    d.refuse(Code::SchedulerBypass,
             fmt::format("{} names ResourceClaims but does not request {}, so kube-scheduler would place it without "
                         "asking tally-extender where its pools' units are free (the gpu-pods mutating webhook adds "
                         "it)",
                         podSubject(pod), kClaimPodMarker));
    return d;
  }
  if (tallys) return d;
  std::string asks;
  for (const auto& [resource, amount] : demand.requests) {
    asks += fmt::format("{}{} {}", asks.empty() ? "" : ", ", amount, resource);
  }
  if (claimPod) asks += fmt::format("{}its ResourceClaims", asks.empty() ? "" : ", ");
  d.refuse(Code::SchedulerBypass,
           fmt::format("{} asks for {} but names scheduler {}, which does not ask Tally where GPU units are free; GPU "
                       "pods are placed by {} (the gpu-pods mutating webhook sets it)",
                       podSubject(pod), asks, scheduler,
                       policy.schedulers.empty() ? std::string("no scheduler (none configured)")
                                                 : "scheduler " + policy.schedulers.front()));
  return d;
}

CreateRoute routeAtCreate(const Cluster& cluster, const CapacityView& view, const PodDemand& demand,
                          const PlacementPolicy& policy) {
  CreateRoute route;
  const Pod& pod = *demand.pod;
  if (!pod.nodeName.empty()) {
    route.decision = checkPresetNode(cluster, view, demand, pod.nodeName);
    if (!route.decision.allowed()) return route;
    route.pinnedNode = pod.nodeName;
  }
  if (policy.schedulers.empty()) return route;
  route.claimMarker = needsClaimMarker(cluster, pod) && !carriesClaimMarker(pod);
  const bool tallys =
      std::find(policy.schedulers.begin(), policy.schedulers.end(), pod.schedulerName) != policy.schedulers.end();
  if (!tallys) route.scheduler = policy.schedulers.front();
  return route;
}

LauncherPin launcherPin(const Cluster& cluster, const Pod& pod) {
  LauncherPin pin;
  const std::vector<const OwnerReference*> owners = vmiOwners(pod);
  if (owners.empty()) return pin;
  if (auto unsynced = ownerCachesUnsynced(cluster, pod, "its devices' node")) {
    pin.decision.refusals.push_back(std::move(*unsynced));
    return pin;
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

Decision checkGpuPodAtCreate(const Cluster& cluster, const CapacityView& view, const Pod& pod,
                             const PlacementPolicy& policy) {
  CreateLaunch launch = launchAtCreate(cluster, pod);
  if (!launch.decision.allowed()) return launch.decision;
  const PodDemand demand = podDemandAtCreate(cluster, view, pod, launch);
  Decision d = budgetRefusals(demand);
  for (auto& r : checkPodGates(cluster, demand).refusals) d.refusals.push_back(std::move(r));
  for (auto& r : checkPlacedByTally(cluster, view, demand, policy).refusals) d.refusals.push_back(std::move(r));
  return d;
}

}  // namespace tally::model
