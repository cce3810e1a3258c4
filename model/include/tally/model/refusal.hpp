#pragma once
// Decisions carry a machine code and a message a person can act on: the object,
// the quantity and the limit.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tally::model {

enum class Code {
  // node eligibility
  NodeNotReady,
  NodeCordoned,
  NodeModeTransition,
  NodeWrongMode,
  NodeNoInventory,
  NodeNotServed,
  NodeGone,
  DraPoolIncomplete,  // a DRA pool with slices of its newest generation missing
  // admission and placement
  ClassUnknown,
  ClassDeleting,
  CountAboveMax,
  CountInvalid,
  PoolInsufficient,
  NoSingleNode,
  NodeInsufficient,
  ReservedForOthers,
  BudgetExceeded,
  BudgetUnknown,
  NamespaceUnknown,
  NotEntitled,
  GateClosed,
  LauncherWrongNode,
  DeviceUnknown,
  DeviceUnavailable,
  DeviceAttached,
  NotPermitted,
  AddonReductionBlocked,
  AddonUnknown,
  ModeTransitionBlocked,
  InvariantBroken,
  InvariantUnknown,
  TransactionInFlight,
  ReservationMismatch,
  CacheNotSynced,
  SchedulerBypass,
  ClaimNotSeen,          // a ResourceClaim a pod names is not made or not seen yet
  NamespaceUnorganized,  // GPU use in a namespace no Organization holds (TenancyPolicy)
  // ledger records
  RecordSchema,
  RecordTime,
  RecordState,
  RecordForbiddenContent,
  RecordTransition,
  RecordDuplicate,
  kCount,  // not a code: how many there are (stays last)
};

inline constexpr std::size_t kCodeCount = static_cast<std::size_t>(Code::kCount);

// The code's name as the doors and metrics write it; "Unknown" past the last code.
std::string_view toString(Code code);

struct Refusal {
  Code code;
  std::string message;
  friend bool operator==(const Refusal&, const Refusal&) = default;
};

// The result of an admission or placement decision.
struct Decision {
  std::vector<Refusal> refusals;  // empty: allowed
  bool allowed() const { return refusals.empty(); }
  void refuse(Code code, std::string message) { refusals.push_back({code, std::move(message)}); }
  std::string summary() const;  // refusals joined by "; "
};

}  // namespace tally::model
