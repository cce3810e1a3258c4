#include "tally/model/refusal.hpp"

namespace tally::model {

namespace {

constexpr std::string_view nameOf(Code code) {
  switch (code) {
    case Code::NodeNotReady: return "NodeNotReady";
    case Code::NodeCordoned: return "NodeCordoned";
    case Code::NodeModeTransition: return "NodeModeTransition";
    case Code::NodeWrongMode: return "NodeWrongMode";
    case Code::NodeNoInventory: return "NodeNoInventory";
    case Code::NodeNotServed: return "NodeNotServed";
    case Code::NodeGone: return "NodeGone";
    case Code::DraPoolIncomplete: return "DraPoolIncomplete";
    case Code::ClassUnknown: return "ClassUnknown";
    case Code::ClassDeleting: return "ClassDeleting";
    case Code::CountAboveMax: return "CountAboveMax";
    case Code::CountInvalid: return "CountInvalid";
    case Code::PoolInsufficient: return "PoolInsufficient";
    case Code::NoSingleNode: return "NoSingleNode";
    case Code::NodeInsufficient: return "NodeInsufficient";
    case Code::ReservedForOthers: return "ReservedForOthers";
    case Code::BudgetExceeded: return "BudgetExceeded";
    case Code::BudgetUnknown: return "BudgetUnknown";
    case Code::NamespaceUnknown: return "NamespaceUnknown";
    case Code::NotEntitled: return "NotEntitled";
    case Code::GateClosed: return "GateClosed";
    case Code::LauncherWrongNode: return "LauncherWrongNode";
    case Code::DeviceUnknown: return "DeviceUnknown";
    case Code::DeviceUnavailable: return "DeviceUnavailable";
    case Code::DeviceAttached: return "DeviceAttached";
    case Code::NotPermitted: return "NotPermitted";
    case Code::AddonReductionBlocked: return "AddonReductionBlocked";
    case Code::AddonUnknown: return "AddonUnknown";
    case Code::ModeTransitionBlocked: return "ModeTransitionBlocked";
    case Code::InvariantBroken: return "InvariantBroken";
    case Code::InvariantUnknown: return "InvariantUnknown";
    case Code::TransactionInFlight: return "TransactionInFlight";
    case Code::ReservationMismatch: return "ReservationMismatch";
    case Code::CacheNotSynced: return "CacheNotSynced";
    case Code::SchedulerBypass: return "SchedulerBypass";
    case Code::ClaimNotSeen: return "ClaimNotSeen";
    case Code::NamespaceUnorganized: return "NamespaceUnorganized";
    case Code::RecordSchema: return "RecordSchema";
    case Code::RecordTime: return "RecordTime";
    case Code::RecordState: return "RecordState";
    case Code::RecordForbiddenContent: return "RecordForbiddenContent";
    case Code::RecordTransition: return "RecordTransition";
    case Code::RecordDuplicate: return "RecordDuplicate";
    case Code::kCount: break;
  }
  return {};
}

// Every code below kCount has its name (a code added without one fails here).
constexpr bool everyCodeNamed() {
  for (std::size_t c = 0; c < kCodeCount; ++c) {
    if (nameOf(static_cast<Code>(c)).empty()) return false;
  }
  return true;
}
static_assert(everyCodeNamed(), "a model::Code has no name in nameOf");

}  // namespace

std::string_view toString(Code code) {
  const std::string_view name = nameOf(code);
  return name.empty() ? "Unknown" : name;
}

std::string Decision::summary() const {
  std::string out;
  for (const auto& r : refusals) {
    if (!out.empty()) out += "; ";
    out += r.message;
  }
  return out;
}

}  // namespace tally::model
