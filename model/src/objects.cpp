#include "tally/model/objects.hpp"

namespace tally::model {

std::string_view toString(NodeMode mode) {
  switch (mode) {
    case NodeMode::Unset: return "";
    case NodeMode::Disabled: return "disabled";
    case NodeMode::PodHami: return "pod-hami";
    case NodeMode::PodHamiDra: return "pod-hami-dra";
    case NodeMode::VmPassthrough: return "vm-passthrough";
    case NodeMode::VmVgpu: return "vm-vgpu";
    case NodeMode::Unknown: return "unknown";
  }
  return "unknown";
}

NodeMode parseNodeMode(std::string_view text) {
  if (text.empty()) return NodeMode::Unset;
  if (text == "disabled") return NodeMode::Disabled;
  if (text == "pod-hami") return NodeMode::PodHami;
  if (text == "pod-hami-dra") return NodeMode::PodHamiDra;
  if (text == "vm-passthrough") return NodeMode::VmPassthrough;
  if (text == "vm-vgpu") return NodeMode::VmVgpu;
  return NodeMode::Unknown;
}

std::string_view toString(Workload w) { return w == Workload::Vm ? "vm" : "pod"; }

std::string_view toString(Allocation a) {
  switch (a) {
    case Allocation::Passthrough: return "passthrough";
    case Allocation::Vgpu: return "vgpu";
    case Allocation::Shared: return "shared";
  }
  return "unknown";
}

NodeMode defaultNodeMode(Allocation allocation) {
  switch (allocation) {
    case Allocation::Passthrough: return NodeMode::VmPassthrough;
    case Allocation::Vgpu: return NodeMode::VmVgpu;
    case Allocation::Shared: return NodeMode::PodHami;
  }
  return NodeMode::Unknown;
}

PodPhase parsePodPhase(std::string_view text) {
  if (text == "Pending" || text.empty()) return PodPhase::Pending;
  if (text == "Running") return PodPhase::Running;
  if (text == "Succeeded") return PodPhase::Succeeded;
  if (text == "Failed") return PodPhase::Failed;
  return PodPhase::Unknown;
}

std::string_view toString(DevicePhase p) {
  switch (p) {
    case DevicePhase::Pending: return "Pending";
    case DevicePhase::Bound: return "Bound";
    case DevicePhase::Attached: return "Attached";
    case DevicePhase::Lost: return "Lost";
    case DevicePhase::Released: return "Released";
  }
  return "Unknown";
}

std::optional<DevicePhase> parseDevicePhase(std::string_view text) {
  if (text.empty() || text == "Pending") return DevicePhase::Pending;
  if (text == "Bound") return DevicePhase::Bound;
  if (text == "Attached") return DevicePhase::Attached;
  if (text == "Lost") return DevicePhase::Lost;
  if (text == "Released") return DevicePhase::Released;
  return std::nullopt;
}

bool holdsNodeUnits(const GpuDevice& d) {
  return (d.phase == DevicePhase::Bound || d.phase == DevicePhase::Attached) && !d.node.empty();
}

bool countsAgainstBudget(const GpuDevice& d) { return d.phase != DevicePhase::Released; }

std::optional<std::string> reservationProfile(const Addon& addon) {
  if (addon.selfService || addon.gpu.size() != 1) return std::nullopt;
  const auto& [profile, grant] = *addon.gpu.begin();
  if (grant.devices <= 0 || grant.shares != 0 || grant.memoryMiB != 0 || grant.corePercent != 0) return std::nullopt;
  return profile;
}

}  // namespace tally::model
