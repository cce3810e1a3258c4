#pragma once
// The per-node filter decision, written once. filterNode() feeds it facts read
// from a Cluster and a CapacityView; FitTable feeds it facts precomputed per
// snapshot. Both therefore refuse the same nodes with the same reasons.

#include <fmt/format.h>

#include "tally/model/admission.hpp"
#include "tally/model/units.hpp"
#include "tally/model/usage.hpp"

namespace tally::model::detail {

// What the filter needs to know about one resource on one node.
struct ResourceFacts {
  const DeviceClass* cls = nullptr;  // the class serving the resource there, if any
  bool eligible = true;              // nodeIneligibility() found nothing
  std::int64_t served = 0;
  std::int64_t used = 0;
  std::int64_t held = 0;
};

inline bool ridesAlong(std::string_view resource) {
  // Memory and core figures of shared pods ride along with nvidia.com/gpu.
  return resource == "nvidia.com/gpumem" || resource == "nvidia.com/gpucores";
}

// `node` gives the Node object, only asked for when a message needs it.
template <typename FactsOf, typename NodeOf>
NodeVerdict decideNode(const Cluster& cluster, const PodDemand& demand, std::string_view nodeName, FactsOf&& factsOf,
                       NodeOf&& nodeOf) {
  if (!demand.podUnresolvable.empty()) return {Verdict::Unresolvable, demand.podUnresolvable.front()};
  const Pod& pod = *demand.pod;
  if (demand.launcherOf && !demand.requiredNode.empty() && nodeName != demand.requiredNode) {
    return {Verdict::Unresolvable,
            Refusal{Code::LauncherWrongNode,
                    fmt::format("pod {}/{} launches VMI {} whose GPUs are held on node {}", pod.ns, pod.name,
                                demand.launcherOf->name, demand.requiredNode)}};
  }
  for (const auto& [resource, amount] : demand.requests) {
    std::int64_t need =
        demand.attached.empty() ? amount : amount - capacityCoverage(demand.attached, cluster, resource, nodeName);
    if (need <= 0) continue;
    const ResourceFacts facts = factsOf(std::string_view(resource));
    if (!facts.cls) {
      if (ridesAlong(resource)) continue;
      const Node& node = nodeOf();
      return {Verdict::Unresolvable,
              Refusal{Code::NodeNotServed,
                      fmt::format("node {} (GPU mode '{}') serves no GPU class for {}", nodeName,
                                  toString(poolMode(node)),
                                  resource)}};
    }
    const DeviceClass& cls = *facts.cls;
    if (!facts.eligible) {
      Refusal why = *nodeIneligibility(nodeOf(), cls);
      bool transient = why.code == Code::NodeNotReady || why.code == Code::NodeCordoned;
      return {transient ? Verdict::Unschedulable : Verdict::Unresolvable, std::move(why)};
    }
    if (!cls.gateOpen) {
      return {Verdict::Unresolvable,
              Refusal{Code::GateClosed, fmt::format("pool {} is closed to new GPU workloads by a failed audit ({})",
                                                    cls.name, cls.gateFailureId)}};
    }
    if (facts.served == 0) {
      NodeUnits units = unitsServed(nodeOf(), cls);
      if (units.notServed) return {Verdict::Unresolvable, *units.notServed};
    }
    std::int64_t free = std::max<std::int64_t>(0, facts.served - facts.used);
    if (free < need) {
      return {Verdict::Unschedulable,
              Refusal{Code::NodeInsufficient,
                      fmt::format("node {} has {} of {} {} free ({} held by GPUDevices); pod needs {}", nodeName, free,
                                  facts.served, resource, facts.held, need)}};
    }
    auto pool = demand.poolAvailable.find(cls.name);
    if (pool != demand.poolAvailable.end() && pool->second < need) {
      return {Verdict::Unschedulable,
              Refusal{Code::ReservedForOthers,
                      fmt::format("pool {} has {} unit(s) left after idle reservations of other organizations; pod "
                                  "needs {}",
                                  cls.name, std::max<std::int64_t>(0, pool->second), need)}};
    }
  }
  if (!demand.podWide.empty()) return {Verdict::Unschedulable, demand.podWide.front()};
  return {Verdict::Fits, std::nullopt};
}

}  // namespace tally::model::detail
