#pragma once
// The per-node filter decision, written once. filterNode() feeds it facts read
// from a Cluster and a CapacityView; FitTable feeds it facts precomputed per
// snapshot. Both therefore refuse the same nodes with the same reasons.

#include <fmt/format.h>

#include <algorithm>

#include "tally/model/admission.hpp"
#include "tally/model/audit.hpp"
#include "tally/model/capacity.hpp"
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
  NodeMode mode = NodeMode::Unset;  // poolMode() of the node
};

inline bool ridesAlong(std::string_view resource) {
  // Memory and core figures of shared pods ride along with nvidia.com/gpu.
  return resource == "nvidia.com/gpumem" || resource == "nvidia.com/gpucores";
}

// `nodeOf` gives the Node object, only asked for when a message needs it. The
// verdict depends on the node's name only for launchers (their pinned node and
// the units their own devices cover) and never names it in a message: the
// scheduler counts identical reasons across nodes in its FailedScheduling
// event, so a reason worded per node would make that event one line per node.
template <typename FactsOf, typename NodeOf>
NodeVerdict decideNode(const Cluster& cluster, const PodDemand& demand, std::string_view nodeName, FactsOf&& factsOf,
                       NodeOf&& nodeOf) {
  if (!demand.podUnresolvable.empty()) return {Verdict::Unresolvable, demand.podUnresolvable.front()};
  const Pod& pod = *demand.pod;
  if (demand.launcherOf && !demand.requiredNode.empty() && nodeName != demand.requiredNode) {
    return {
        Verdict::Unresolvable,
        Refusal{Code::LauncherWrongNode, fmt::format("pod {}/{} launches VMI {} whose GPUs are held on node {}", pod.ns,
                                                     pod.name, demand.launcherOf->name, demand.requiredNode)}};
  }
  for (const auto& [resource, amount] : demand.requests) {
    std::int64_t need =
        demand.attached.empty() ? amount : amount - capacityCoverage(demand.attached, cluster, resource, nodeName);
    if (need <= 0) continue;
    const ResourceFacts facts = factsOf(std::string_view(resource));
    if (!facts.cls) {
      if (ridesAlong(resource)) continue;
      return {Verdict::Unresolvable,
              Refusal{Code::NodeNotServed, fmt::format("node(s) in GPU mode '{}' serve no GPU class for {}",
                                                       toString(facts.mode), resource)}};
    }
    const DeviceClass& cls = *facts.cls;
    if (!facts.eligible) {
      Refusal why = *nodeIneligibility(nodeOf(), cls);
      bool transient = why.code == Code::NodeNotReady || why.code == Code::NodeCordoned;
      return {transient ? Verdict::Unschedulable : Verdict::Unresolvable, std::move(why)};
    }
    if (!cls.gateOpen) return {Verdict::Unresolvable, Refusal{Code::GateClosed, gateClosedMessage(cls)}};
    if (facts.served == 0) {
      NodeUnits units = unitsServed(nodeOf(), cls);
      if (units.notServed) return {Verdict::Unresolvable, *units.notServed};
    }
    std::int64_t free = std::max<std::int64_t>(0, facts.served - facts.used);
    if (free < need) {
      return {Verdict::Unschedulable,
              Refusal{Code::NodeInsufficient,
                      fmt::format("node(s) with {} of {} {} free ({} held by GPUDevices); pod needs {}", free,
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

// The score of one node, written once for scoreNode() and FitTable. `idleOthers(cls)`
// is idleReservedByOthers() of the class for the pod's organization.
template <typename FactsOf, typename IdleOthers>
int scoreCore(const Cluster& cluster, const PodDemand& demand, std::string_view nodeName, ScoreStrategy strategy,
              FactsOf&& factsOf, IdleOthers&& idleOthers) {
  std::int64_t served = 0, leftover = 0, used = 0;
  bool reservationsIdle = false;
  for (const auto& [resource, amount] : demand.requests) {
    std::int64_t need =
        demand.attached.empty() ? amount : amount - capacityCoverage(demand.attached, cluster, resource, nodeName);
    const ResourceFacts facts = factsOf(std::string_view(resource));
    if (!facts.cls) continue;
    served += facts.served;
    used += facts.used;
    leftover += std::max<std::int64_t>(0, facts.served - facts.used - std::max<std::int64_t>(0, need));
    reservationsIdle = reservationsIdle || idleOthers(*facts.cls) > 0;
  }
  if (served <= 0) return 0;
  if (strategy == ScoreStrategy::Spread) return static_cast<int>((10 * leftover) / served);
  int score = static_cast<int>((10 * (served - leftover)) / served);
  // Breaking into an untouched node spends a whole free node that a whole-set VM
  // order (or another organization's idle reservation) may need.
  if (used == 0 && leftover > 0) score -= reservationsIdle ? 4 : 2;
  return std::clamp(score, 0, 10);
}

}  // namespace tally::model::detail
