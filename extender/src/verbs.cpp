#include "tally/extender/verbs.hpp"

#include <algorithm>
#include <numeric>

namespace tally::extender {

namespace {

using Answer = model::FitTable::Query::Answer;

// One request's questions to a snapshot: the pod's demand and the query over it.
struct Asked {
  model::PodDemand demand;
  model::FitTable::Query query;
  Asked(const ExtenderSnapshot& snap, const model::Pod& pod)
      : demand(model::podDemand(snap.cluster(), snap.usage, pod)),
        query(snap.fit.query(snap.cluster(), snap.usage, demand)) {}
};

// The candidates' rows in the snapshot's FitTable, as the last answersFor on
// this thread found them.
thread_local std::vector<std::uint32_t> candidateRows;

// The pod's answer for every candidate, in order (verdict null: a node the
// snapshot does not hold yet); thread-local scratch the thread's next call reuses.
const std::vector<Answer>& answersFor(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, Asked& asked) {
  thread_local std::vector<Answer> answers;
  snap.fit.findAll(args.nodeNames, candidateRows);
  asked.query.filterAll(candidateRows, answers);
  return answers;
}

// A model score as prioritize sends it: 0..10.
int sentScore(int score) { return std::clamp(score, 0, 10); }

// The pod's score (0..10) on every candidate, in order: 0 for one the snapshot
// does not hold, neutral zeros when it is not ready; thread-local scratch the
// thread's next call reuses.
const std::vector<int>& scoresFor(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                                  model::ScoreStrategy strategy) {
  thread_local std::vector<std::uint32_t> rows;
  thread_local std::vector<int> scores;
  if (!snap.ready()) {
    scores.assign(args.nodeNames.size(), 0);
    return scores;
  }
  Asked asked(snap, args.pod);
  snap.fit.findAll(args.nodeNames, rows);
  asked.query.scoreAll(rows, strategy, scores);
  for (int& score : scores) score = sentScore(score);
  return scores;
}

std::string notCachedYet(std::string_view node) {
  return "node " + std::string(node) + " is not in tally-extender's cache yet";
}

// Hands `to` the filter's answer on every candidate, in order: to.pass(i),
// to.fail(i, message) or to.failForGood(i, message), a message being what
// to.message(text) returned for it. Nodes that share a verdict share its
// message, made once; the tally is counted per verdict, not per node. Returns
// why the snapshot cannot answer yet (handing over nothing), or "".
template <class To>
std::string decideFilter(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, To& to, DecisionTally* tally) {
  if (!snap.ready()) {
    if (tally) tally->add(FilterResultKind::Error, model::Code::CacheNotSynced);
    return notReadyReason(snap);
  }
  Asked asked(snap, args.pod);
  const std::vector<Answer>& answers = answersFor(snap, args, asked);
  struct Shared {
    std::uint32_t nodes = 0;
    FilterResultKind kind = FilterResultKind::Pass;
    std::optional<model::Code> code;
    typename To::Message message{};
  };
  std::vector<Shared> shared;
  std::uint32_t unknown = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const Answer& a = answers[i];
    if (!a.verdict) {
      to.fail(i, to.message(notCachedYet(args.nodeNames[i])));
      ++unknown;
      continue;
    }
    if (a.verdict->verdict == model::Verdict::Fits) {
      to.pass(i);
      continue;
    }
    if (a.id >= shared.size()) shared.resize(a.id + 1);
    Shared& sh = shared[a.id];
    if (sh.nodes++ == 0) {
      const model::NodeVerdict& v = *a.verdict;
      const bool resolvable = v.verdict == model::Verdict::Unschedulable;
      sh.kind = resolvable ? FilterResultKind::Failed : FilterResultKind::Unresolvable;
      sh.code = v.reason ? std::optional(v.reason->code) : std::nullopt;
      sh.message = to.message(v.reason ? std::string_view(v.reason->message)
                                       : std::string_view(resolvable ? "does not fit" : "cannot fit"));
    }
    if (sh.kind == FilterResultKind::Failed) {
      to.fail(i, sh.message);
    } else {
      to.failForGood(i, sh.message);
    }
  }
  if constexpr (requires { to.decided(asked); }) to.decided(asked);
  if (tally) {
    const std::size_t rejected =
        unknown + std::accumulate(shared.begin(), shared.end(), std::size_t{0},
                                  [](std::size_t n, const Shared& sh) { return n + sh.nodes; });
    tally->add(FilterResultKind::Pass, std::nullopt, static_cast<std::uint32_t>(answers.size() - rejected));
    if (unknown) tally->add(FilterResultKind::Failed, std::nullopt, unknown);
    for (const Shared& sh : shared) {
      if (sh.nodes) tally->add(sh.kind, sh.code, sh.nodes);
    }
  }
  return {};
}

// decideFilter's answer kept as lists, the result owning the messages.
struct Listed {
  using Message = std::string_view;
  const wire::ExtenderArgs& args;
  wire::FilterResult& result;
  Message message(std::string_view text) { return result.messages.emplace_back(text); }
  void pass(std::size_t i) {
    result.passed.push_back(args.nodeNames[i]);
    if (args.fromNodeList && i < args.rawNodes.size()) result.rawPassed.push_back(args.rawNodes[i]);
  }
  void fail(std::size_t i, Message m) { result.failed.emplace_back(args.nodeNames[i], m); }
  void failForGood(std::size_t i, Message m) { result.unresolvable.emplace_back(args.nodeNames[i], m); }
};

// decideFilter's answer handed straight to the encoder.
struct Written {
  using Message = wire::FilterResultWriter::Message;
  const wire::ExtenderArgs& args;
  wire::FilterResultWriter& writer;
  Message message(std::string_view text) { return writer.message(text); }
  void pass(std::size_t i) {
    if (!args.fromNodeList) {
      writer.pass(args.nodeNames[i]);
    } else if (i < args.rawNodes.size()) {
      writer.passNode(args.rawNodes[i]);
    }
  }
  void fail(std::size_t i, Message m) { writer.fail(args.nodeNames[i], m); }
  void failForGood(std::size_t i, Message m) { writer.failForGood(args.nodeNames[i], m); }
};

// Written, also keeping what prioritize will need: the passed candidates, and
// once all are decided, their scores from the same query.
struct WrittenAndScored : Written {
  FilterScores& keep;
  model::ScoreStrategy strategy;
  std::vector<std::uint32_t> passed;  // candidate indexes

  void pass(std::size_t i) {
    Written::pass(i);
    passed.push_back(static_cast<std::uint32_t>(i));
  }
  void decided(Asked& asked) {
    thread_local std::vector<std::uint32_t> rows;
    thread_local std::vector<int> scores;
    rows.clear();
    keep.names.clear();
    keep.ends.clear();
    keep.listed.clear();
    for (std::uint32_t i : passed) {
      rows.push_back(candidateRows[i]);
      keep.names += args.nodeNames[i];
      keep.ends.push_back(static_cast<std::uint32_t>(keep.names.size()));
    }
    asked.query.scoreAll(rows, strategy, scores);
    for (std::size_t k = 0; k < scores.size(); ++k) {
      const int score = sentScore(scores[k]);
      if (wire::listedScore(score)) keep.listed.emplace_back(static_cast<std::uint32_t>(k), score);
    }
    keep.pod = args.pod;
    keep.strategy = strategy;
    keep.kept = true;
  }
};

// The filter's answer written as it is decided, by the recipient makeTo(writer)
// returns (Written or WrittenAndScored).
template <class MakeTo>
std::string writeFilter(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally,
                        MakeTo makeTo) {
  wire::FilterResultWriter writer(args.plainNames, args.fromNodeList);
  if (snap.ready()) writer.reserveFor(args.fromNodeList ? args.rawNodes : args.nodeNames);
  auto to = makeTo(writer);
  const std::string error = decideFilter(snap, args, to, tally);
  return std::move(writer).finish(error);
}

}  // namespace

bool FilterScores::sameCandidates(const std::vector<std::string_view>& nodeNames) const {
  if (!kept || nodeNames.size() != ends.size()) return false;
  std::uint32_t begin = 0;
  for (std::size_t i = 0; i < ends.size(); ++i) {
    if (std::string_view(names).substr(begin, ends[i] - begin) != nodeNames[i]) return false;
    begin = ends[i];
  }
  return true;
}

wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  wire::FilterResult result;
  result.asNodeList = args.fromNodeList;
  result.plainNames = args.plainNames;
  result.passed.reserve(args.nodeNames.size());
  Listed listed{args, result};
  result.error = decideFilter(snap, args, listed, tally);
  return result;
}

std::vector<wire::HostPriority> prioritizeNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy) {
  const std::vector<int>& scores = scoresFor(snap, args, strategy);
  std::vector<wire::HostPriority> out;
  out.reserve(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) out.push_back({args.nodeNames[i], scores[i]});
  return out;
}

std::string filterResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  return writeFilter(snap, args, tally, [&](wire::FilterResultWriter& writer) { return Written{args, writer}; });
}

std::string filterResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally,
                           FilterScores& keep, model::ScoreStrategy strategy) {
  // Kept only once every candidate is decided (WrittenAndScored::decided):
  // not when the snapshot cannot decide, nor for a Nodes list.
  keep.kept = false;
  if (args.fromNodeList) return filterResponse(snap, args, tally);
  return writeFilter(snap, args, tally, [&](wire::FilterResultWriter& writer) {
    WrittenAndScored written{{args, writer}, keep, strategy, {}};
    written.passed.reserve(args.nodeNames.size());
    return written;
  });
}

std::optional<std::string> prioritizeFromFilter(const FilterScores& kept, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy) {
  if (!kept.kept || kept.strategy != strategy || args.fromNodeList || !kept.sameCandidates(args.nodeNames) ||
      !(kept.pod == args.pod)) {
    return std::nullopt;
  }
  wire::HostPriorityWriter writer(args.plainNames);
  for (const auto& [index, score] : kept.listed) writer.add(args.nodeNames[index], score);
  return std::move(writer).finish();
}

std::string prioritizeResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                               model::ScoreStrategy strategy) {
  wire::HostPriorityWriter writer(args.plainNames);
  writer.addAll(args.nodeNames, scoresFor(snap, args, strategy));
  return std::move(writer).finish();
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
      if (const model::Pod* pod = boundPod(snap, nodeName, uid)) candidates.push_back(pod);
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
