#include "tally/extender/verbs.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "tally/common/json.hpp"

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

// The pod's answer for every candidate, in order (verdict null: a node the
// snapshot does not hold yet); thread-local scratch the thread's next call reuses.
const std::vector<Answer>& answersFor(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, Asked& asked) {
  thread_local std::vector<std::uint32_t> rows;
  thread_local std::vector<Answer> answers;
  snap.fit.findAll(args.nodeNames, rows);
  asked.query.filterAll(rows, answers);
  return answers;
}

// The pod's score (unclamped) on every candidate, 0 for one the snapshot does not hold.
const std::vector<int>& scoresFor(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, Asked& asked,
                                  model::ScoreStrategy strategy) {
  thread_local std::vector<std::uint32_t> rows;
  thread_local std::vector<int> scores;
  snap.fit.findAll(args.nodeNames, rows);
  asked.query.scoreAll(rows, strategy, scores);
  return scores;
}

std::string notCachedYet(std::string_view node) {
  return "node " + std::string(node) + " is not in tally-extender's cache yet";
}

// Copies the n bytes of a node name (tens of bytes) in word-sized moves, the
// last one overlapping: cheaper than a call to memcpy for each of thousands.
inline void copyShort(char* d, const char* s, std::size_t n) {
  if (n < 8) {
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  for (std::size_t i = 0; i + 8 < n; i += 8) std::memcpy(d + i, s + i, 8);
  std::memcpy(d + n - 8, s + n - 8, 8);
}

// Copies `name` between quotes at `d` and returns the end: for names that need
// no escape (ExtenderArgs::plainNames), which is what appendJsonString writes.
char* putQuoted(char* d, std::string_view name) {
  *d++ = '"';
  copyShort(d, name.data(), name.size());
  d += name.size();
  *d++ = '"';
  return d;
}

}  // namespace

wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  wire::FilterResult result;
  result.asNodeList = args.fromNodeList;
  result.plainNames = args.plainNames;
  if (!snap.ready()) {
    result.error = notReadyReason(snap);
    if (tally) tally->add(FilterResultKind::Error, model::Code::CacheNotSynced);
    return result;
  }
  Asked asked(snap, args.pod);
  // Nodes sharing a verdict share its message: each is copied into the result once.
  std::vector<std::string_view> messageOf;
  auto message = [&](const Answer& a, std::string_view fallback) {
    if (a.id >= messageOf.size()) messageOf.resize(a.id + 1);
    std::string_view& m = messageOf[a.id];
    if (m.data() == nullptr) {
      m = result.messages.emplace_back(a.verdict->reason ? std::string_view(a.verdict->reason->message) : fallback);
    }
    return m;
  };
  result.passed.reserve(args.nodeNames.size());
  const std::vector<Answer>& answers = answersFor(snap, args, asked);
  for (std::size_t i = 0; i < args.nodeNames.size(); ++i) {
    const std::string_view name = args.nodeNames[i];
    const Answer& a = answers[i];
    if (!a.verdict) {
      result.failed.emplace_back(name, result.messages.emplace_back(notCachedYet(name)));
      if (tally) tally->add(FilterResultKind::Failed, std::nullopt);
      continue;
    }
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
  Asked asked(snap, args.pod);
  const std::vector<int>& scores = scoresFor(snap, args, asked, strategy);
  for (std::size_t i = 0; i < scores.size(); ++i) out.push_back({args.nodeNames[i], std::clamp(scores[i], 0, 10)});
  return out;
}

std::string filterResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally) {
  if (!snap.ready() || args.fromNodeList || !args.plainNames) return wire::encode(filterNodes(snap, args, tally));
  Asked asked(snap, args.pod);
  const std::vector<Answer>& answers = answersFor(snap, args, asked);

  // Per distinct verdict: ':' and its message as a JSON literal, and how many
  // nodes got it (tallied at the end).
  struct Shared {
    std::string literal;
    std::uint32_t nodes = 0;
    FilterResultKind kind = FilterResultKind::Pass;
    std::optional<model::Code> code;
  };
  std::vector<Shared> shared;
  thread_local std::string failed, unresolvable;  // "name":"message" pairs, comma-separated
  failed.clear();
  unresolvable.clear();
  std::uint32_t unknown = 0;

  constexpr std::string_view kHead = "{\"Nodes\":null,\"NodeNames\":[";
  std::size_t bound = kHead.size();
  for (std::string_view name : args.nodeNames) bound += name.size() + 3;
  std::string out;
  out.resize(bound);
  char* d = out.data();
  std::memcpy(d, kHead.data(), kHead.size());
  d += kHead.size();
  char* const first = d;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const std::string_view name = args.nodeNames[i];
    const Answer& a = answers[i];
    if (!a.verdict) {
      if (!failed.empty()) failed += ',';
      appendJsonString(failed, name);
      failed += ':';
      appendJsonString(failed, notCachedYet(name));
      ++unknown;
      continue;
    }
    if (a.verdict->verdict == model::Verdict::Fits) {
      if (d != first) *d++ = ',';
      d = putQuoted(d, name);
      continue;
    }
    if (a.id >= shared.size()) shared.resize(a.id + 1);
    Shared& sh = shared[a.id];
    if (sh.nodes++ == 0) {
      const model::NodeVerdict& v = *a.verdict;
      const bool resolvable = v.verdict == model::Verdict::Unschedulable;
      sh.kind = resolvable ? FilterResultKind::Failed : FilterResultKind::Unresolvable;
      sh.code = v.reason ? std::optional(v.reason->code) : std::nullopt;
      sh.literal = ":";
      appendJsonString(sh.literal, v.reason ? std::string_view(v.reason->message)
                                            : std::string_view(resolvable ? "does not fit" : "cannot fit"));
    }
    std::string& to = sh.kind == FilterResultKind::Failed ? failed : unresolvable;
    const std::size_t at = to.size();
    to.resize(at + (at ? 1 : 0) + name.size() + 2 + sh.literal.size());
    char* w = to.data() + at;
    if (at) *w++ = ',';
    w = putQuoted(w, name);
    std::memcpy(w, sh.literal.data(), sh.literal.size());
  }
  out.resize(static_cast<std::size_t>(d - out.data()));
  out.reserve(out.size() + failed.size() + unresolvable.size() + 64);
  out += "],\"FailedNodes\":{";
  out += failed;
  out += "},\"FailedAndUnresolvableNodes\":{";
  out += unresolvable;
  out += "},\"Error\":\"\"}";

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
  return out;
}

std::string prioritizeResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                               model::ScoreStrategy strategy) {
  if (!snap.ready() || !args.plainNames) {
    return wire::encode(prioritizeNodes(snap, args, strategy), args.plainNames);
  }
  Asked asked(snap, args.pod);
  const std::vector<int>& scores = scoresFor(snap, args, asked, strategy);
  constexpr std::string_view kHost = "{\"Host\":\"", kScore = "\",\"Score\":";
  std::size_t bound = 2;
  for (std::string_view name : args.nodeNames) bound += name.size() + kHost.size() + kScore.size() + 4;
  std::string out;
  out.resize(bound);
  char* d = out.data();
  *d++ = '[';
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const std::string_view name = args.nodeNames[i];
    const int score = std::clamp(scores[i], 0, 10);
    if (!wire::listedScore(score)) continue;
    if (d != out.data() + 1) *d++ = ',';
    std::memcpy(d, kHost.data(), kHost.size());
    d += kHost.size();
    copyShort(d, name.data(), name.size());
    d += name.size();
    std::memcpy(d, kScore.data(), kScore.size());
    d += kScore.size();
    if (score == 10) {
      *d++ = '1';
      *d++ = '0';
    } else {
      *d++ = static_cast<char>('0' + score);
    }
    *d++ = '}';
  }
  *d++ = ']';
  out.resize(static_cast<std::size_t>(d - out.data()));
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
