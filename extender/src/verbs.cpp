#include "tally/extender/verbs.hpp"

#include <algorithm>

namespace tally::extender {

wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  wire::FilterResult result;
  result.asNodeList = args.fromNodeList;
  result.plainNames = args.plainNames;
  if (!snap.ready()) {
    result.error = snap.notReadyReason();
    if (tally) tally->add(FilterResultKind::Error, model::Code::CacheNotSynced);
    return result;
  }
  const model::Cluster& cluster = snap.cluster();
  model::PodDemand demand = model::podDemand(cluster, snap.usage, args.pod);
  model::FitTable::Query query = snap.fit.query(cluster, snap.usage, demand);
  // Nodes sharing a verdict share its message: each is copied into the result once.
  std::vector<std::string_view> messageOf;
  auto message = [&](const model::FitTable::Query::Answer& a, std::string_view fallback) {
    if (a.id >= messageOf.size()) messageOf.resize(a.id + 1);
    std::string_view& m = messageOf[a.id];
    if (m.data() == nullptr) {
      m = result.messages.emplace_back(a.verdict->reason ? std::string_view(a.verdict->reason->message) : fallback);
    }
    return m;
  };
  result.passed.reserve(args.nodeNames.size());
  thread_local std::vector<std::uint32_t> rows;  // scratch, reused by the thread's next request
  snap.fit.findAll(args.nodeNames, rows);
  for (std::size_t i = 0; i < args.nodeNames.size(); ++i) {
    const std::string_view name = args.nodeNames[i];
    if (i + 4 < rows.size() && rows[i + 4] != model::FitTable::kNoRow) snap.fit.prefetch(rows[i + 4]);
    const std::uint32_t row = rows[i];
    if (row == model::FitTable::kNoRow) {
      std::string_view m = result.messages.emplace_back("node " + std::string(name) + " is not in tally-extender's cache yet");
      result.failed.emplace_back(name, m);
      if (tally) tally->add(FilterResultKind::Failed, std::nullopt);
      continue;
    }
    const model::FitTable::Query::Answer a = query.filter(row);
    const model::NodeVerdict& v = *a.verdict;
    const std::optional<model::Code> code = v.reason ? std::optional(v.reason->code) : std::nullopt;
    switch (v.verdict) {
      case model::Verdict::Fits:
        result.passed.push_back(name);
        if (args.fromNodeList && i < args.rawNodes.size()) result.rawPassed.push_back(args.rawNodes[i]);
        if (tally) tally->add(FilterResultKind::Pass, std::nullopt);
        break;
      case model::Verdict::Unschedulable:
        result.failed.emplace_back(name, message(a, "does not fit"));
        if (tally) tally->add(FilterResultKind::Failed, code);
        break;
      case model::Verdict::Unresolvable:
        result.unresolvable.emplace_back(name, message(a, "cannot fit"));
        if (tally) tally->add(FilterResultKind::Unresolvable, code);
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
  const model::Cluster& cluster = snap.cluster();
  model::PodDemand demand = model::podDemand(cluster, snap.usage, args.pod);
  model::FitTable::Query query = snap.fit.query(cluster, snap.usage, demand);
  thread_local std::vector<std::uint32_t> rows;  // scratch, reused by the thread's next request
  snap.fit.findAll(args.nodeNames, rows);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i + 4 < rows.size() && rows[i + 4] != model::FitTable::kNoRow) snap.fit.prefetch(rows[i + 4]);
    int score = rows[i] == model::FitTable::kNoRow ? 0 : query.score(rows[i], strategy);
    out.push_back({args.nodeNames[i], std::clamp(score, 0, 10)});
  }
  return out;
}

wire::PreemptionResult preemptVictims(const ExtenderSnapshot& snap, const wire::PreemptionArgs& args) {
  wire::PreemptionResult result;
  if (!snap.ready()) return result;
  const model::Cluster& cluster = snap.cluster();
  model::PodDemand demand = model::podDemand(cluster, snap.usage, args.pod);
  for (const auto& [nodeName, victims] : args.victims) {
    auto node = cluster.nodes.find(nodeName);
    if (node == cluster.nodes.end()) continue;
    std::vector<const model::Pod*> candidates;
    for (const auto& uid : victims.podUids) {
      if (const model::Pod* pod = snap.boundPod(nodeName, uid)) candidates.push_back(pod);
    }
    auto kept = model::narrowVictims(cluster, snap.usage, demand, node->second, candidates);
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
