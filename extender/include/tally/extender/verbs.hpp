#pragma once
// The four verbs as functions of one snapshot and one request. Every rule is
// the model's: these only map its verdicts onto the wire's shapes.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tally/extender/snapshot.hpp"
#include "tally/extender/wire.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/refusal.hpp"

namespace tally::extender {

enum class FilterResultKind { Pass, Failed, Unresolvable, Error };
inline constexpr std::size_t kFilterResultKinds = 4;
// Codes the filter counts: every model::Code (model::Code::kCount of them).
using model::kCodeCount;

// Per-request decision counts by result and the model's reason code (none for a
// pass, an unknown node or an error); the caller turns them into metrics.
struct DecisionTally {
  static constexpr std::size_t kNoCode = kCodeCount;
  std::array<std::array<std::uint32_t, kCodeCount + 1>, kFilterResultKinds> counts{};

  void add(FilterResultKind result, std::optional<model::Code> code, std::uint32_t n = 1) {
    counts[static_cast<std::size_t>(result)][code ? static_cast<std::size_t>(*code) : kNoCode] += n;
  }
  std::uint32_t count(FilterResultKind result, std::optional<model::Code> code) const {
    return counts[static_cast<std::size_t>(result)][code ? static_cast<std::size_t>(*code) : kNoCode];
  }
  std::uint64_t total() const {
    std::uint64_t n = 0;
    for (const auto& row : counts)
      for (auto c : row) n += c;
    return n;
  }
};

// Nodes the snapshot does not know yet fail (resolvably): a node added a moment
// ago is no reason to refuse the pod for good.
wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                               DecisionTally* tally = nullptr);
// The result holds views into args (node names): a temporary would leave them dangling.
wire::FilterResult filterNodes(const ExtenderSnapshot&, const wire::ExtenderArgs&&, DecisionTally* = nullptr) = delete;

// Scores 0..10 per candidate; neutral zeros when the snapshot is not ready
// (prioritize errors are ignored by the scheduler anyway).
std::vector<wire::HostPriority> prioritizeNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy);

// The encoded answers: the same decisions as filterNodes and prioritizeNodes,
// handed to the wire's writers as they are made instead of kept as lists, so
// byte for byte encode(filterNodes(...)) and encode(prioritizeNodes(...),
// args.plainNames), with the same tally.
std::string filterResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                           DecisionTally* tally = nullptr);
std::string prioritizeResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                               model::ScoreStrategy strategy);

// What a filter answer leaves for the prioritize call that follows it in the
// same scheduling cycle: the pod, the candidates it passed (in order) and the
// scores those have on the snapshot the filter decided on. kube-scheduler
// scores a cycle on the snapshot it filtered on; prioritize answering from the
// filter's snapshot does the same, without resolving the pod and 500 names a
// second time.
struct FilterScores {
  model::Pod pod;
  model::ScoreStrategy strategy = model::ScoreStrategy::BinPack;
  std::string names;                // the passed candidates' names, end to end
  std::vector<std::uint32_t> ends;  // where each passed name ends in `names`
  // (index among the passed, score) of each passed candidate prioritize lists
  // (wire::listedScore), in order.
  std::vector<std::pair<std::uint32_t, int>> listed;
  bool kept = false;  // false: the filter kept nothing (an error, a Nodes list)

  // The candidates are exactly the passed ones, in the same order.
  bool sameCandidates(const std::vector<std::string_view>& nodeNames) const;
};

// filterResponse, which also fills `keep` (its previous contents reused) with
// the scores `strategy` gives the passed candidates. Same answer, same tally.
std::string filterResponse(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args, DecisionTally* tally,
                           FilterScores& keep, model::ScoreStrategy strategy);
// The prioritize answer from what a filter kept: when `args` asks for the same
// pod (every field equal), with the same strategy, over exactly the candidates
// that filter passed; nullopt otherwise (answer with prioritizeResponse).
// Byte for byte what prioritizeResponse gives on the filter's snapshot.
std::optional<std::string> prioritizeFromFilter(const FilterScores& kept, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy);

// Keeps, per node, only the victims whose eviction the model needs for the pod
// to fit; drops nodes where even all of them would not do. Victims unknown to
// the snapshot free no GPU unit and are dropped.
wire::PreemptionResult preemptVictims(const ExtenderSnapshot& snap, const wire::PreemptionArgs& args);

}  // namespace tally::extender
