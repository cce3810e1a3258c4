#include "tally/extender/verbs.hpp"

#include <algorithm>

namespace tally::extender {

wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  wire::FilterResult result;
  result.asNodeList = args.fromNodeList;
  if (!snap.ready()) {
    result.error = snap.notReadyReason();
    if (tally) tally->decisions.push_back({FilterResultKind::Error, model::Code::CacheNotSynced});
    return result;
  }
  const model::Cluster& cluster = snap.cluster;
  model::PodDemand demand = model::podDemand(cluster, snap.usage, args.pod);
  result.passed.reserve(args.nodeNames.size());
  for (std::size_t i = 0; i < args.nodeNames.size(); ++i) {
    const std::string& name = args.nodeNames[i];
    auto row = snap.fit.find(name);
    if (!row) {
      result.failed.emplace_back(name, "node " + name + " is not in tally-extender's cache yet");
      if (tally) tally->decisions.push_back({FilterResultKind::Failed, std::nullopt});
      continue;
    }
    model::NodeVerdict v = snap.fit.filter(cluster, demand, *row);
    switch (v.verdict) {
      case model::Verdict::Fits:
        result.passed.push_back(name);
        if (args.fromNodeList && i < args.rawNodes.size()) result.rawPassed.push_back(args.rawNodes[i]);
        if (tally) tally->decisions.push_back({FilterResultKind::Pass, std::nullopt});
        break;
      case model::Verdict::Unschedulable:
        result.failed.emplace_back(name, v.reason ? v.reason->message : "does not fit");
        if (tally) tally->decisions.push_back({FilterResultKind::Failed, v.reason ? std::optional(v.reason->code) : std::nullopt});
        break;
      case model::Verdict::Unresolvable:
        result.unresolvable.emplace_back(name, v.reason ? v.reason->message : "cannot fit");
        if (tally) {
          tally->decisions.push_back({FilterResultKind::Unresolvable, v.reason ? std::optional(v.reason->code) : std::nullopt});
        }
        break;
    }
  }
  return result;
}

std::vector<wire::HostPriority> prioritizeNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy) {
  std::vector<wire::HostPriority> out;
  out.reserve(args.nodeNames.size());
  if (!snap.ready()) {
    for (const auto& name : args.nodeNames) out.push_back({name, 0});
    return out;
  }
  model::PodDemand demand = model::podDemand(snap.cluster, snap.usage, args.pod);
  for (const auto& name : args.nodeNames) {
    auto node = snap.cluster.nodes.find(name);
    int score = node == snap.cluster.nodes.end() ? 0 : model::scoreNode(snap.cluster, snap.usage, demand, node->second, strategy);
    out.push_back({name, std::clamp(score, 0, 10)});
  }
  return out;
}

wire::PreemptionResult preemptVictims(const ExtenderSnapshot& snap, const wire::PreemptionArgs& args) {
  wire::PreemptionResult result;
  if (!snap.ready()) return result;
  model::PodDemand demand = model::podDemand(snap.cluster, snap.usage, args.pod);
  for (const auto& [nodeName, victims] : args.victims) {
    auto node = snap.cluster.nodes.find(nodeName);
    if (node == snap.cluster.nodes.end()) continue;
    std::vector<const model::Pod*> candidates;
    for (const auto& uid : victims.podUids) {
      if (const model::Pod* pod = snap.boundPod(nodeName, uid)) candidates.push_back(pod);
    }
    auto kept = model::narrowVictims(snap.cluster, snap.usage, demand, node->second, candidates);
    if (!kept) continue;
    wire::MetaVictims narrowed;
    // Fewer victims can only break fewer budgets; which ones the scheduler counted
    // is not on the wire, so keep its count as the bound.
    narrowed.numPdbViolations =
        kept->empty() ? 0 : std::min<std::int64_t>(victims.numPdbViolations, static_cast<std::int64_t>(kept->size()));
    for (const model::Pod* pod : *kept) narrowed.podUids.push_back(pod->uid);
    result.victims.emplace_back(nodeName, std::move(narrowed));
  }
  return result;
}

}  // namespace tally::extender
