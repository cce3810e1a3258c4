#pragma once
// The four verbs as functions of one snapshot and one request. Every rule is
// the model's: these only map its verdicts onto the wire's shapes.

#include <cstdint>
#include <optional>
#include <vector>

#include "tally/extender/snapshot.hpp"
#include "tally/extender/wire.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/refusal.hpp"

namespace tally::extender {

enum class FilterResultKind { Pass, Failed, Unresolvable, Error };
inline constexpr std::size_t kFilterResultKinds = 4;

// One decision for the metrics: its result and the model's reason code (none
// for a pass or an error).
struct DecisionRecord {
  FilterResultKind result;
  std::optional<model::Code> code;
};

// Per-request decision counts; the caller turns them into metrics.
struct DecisionTally {
  std::vector<DecisionRecord> decisions;
};

// Nodes the snapshot does not know yet fail (resolvably): a node added a moment
// ago is no reason to refuse the pod for good.
wire::FilterResult filterNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                               DecisionTally* tally = nullptr);

// Scores 0..10 per candidate; neutral zeros when the snapshot is not ready
// (prioritize errors are ignored by the scheduler anyway).
std::vector<wire::HostPriority> prioritizeNodes(const ExtenderSnapshot& snap, const wire::ExtenderArgs& args,
                                                model::ScoreStrategy strategy);

// Keeps, per node, only the victims whose eviction the model needs for the pod
// to fit; drops nodes where even all of them would not do. Victims unknown to
// the snapshot free no GPU unit and are dropped.
wire::PreemptionResult preemptVictims(const ExtenderSnapshot& snap, const wire::PreemptionArgs& args);

}  // namespace tally::extender
