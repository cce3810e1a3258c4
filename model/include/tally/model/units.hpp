#pragma once
// Units a node serves for a class (SPEC 3.1). Counted once, here, for the
// extender, the binder, the webhooks, the pool status and the audit alike.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tally/model/cluster.hpp"
#include "tally/model/refusal.hpp"

namespace tally::model {

// Shares one physical GPU yields for a shared class:
// min(memoryMiB / share.memoryMiB, 100 / share.corePercent, share.maxSharesPerDevice).
std::int64_t sharesPerDevice(const DeviceClass& cls);

// Units one device of the class is worth in the pool's quota unit
// (1 for passthrough and vGPU, sharesPerDevice for shared).
std::int64_t unitsPerDevice(const DeviceClass& cls);

// The name of the pool's quota unit, for every figure of its equation:
// "shares" for a shared class, "devices" otherwise.
std::string_view quotaUnitName(const DeviceClass& cls);

// The mode whose pool the node belongs to: its expected mode, or its active mode
// when no expectation is set.
NodeMode poolMode(const Node& node);

// Whether the node is a member of the class's pool: its expected mode (or its
// active mode when no expectation is set) is the class's node mode and it
// advertises the class's devices. A sequential node is in one pool only.
bool inPool(const Node& node, const DeviceClass& cls);

struct NodeUnits {
  std::int64_t units = 0;            // in the pool's unit (devices, or shares)
  std::int64_t devices = 0;          // whole devices behind those units
  std::optional<Refusal> notServed;  // why the node serves nothing for the class
  // Why the node serves fewer units than its healthy devices yield (a shared
  // node whose device plugin advertises fewer slots than the class sells), with
  // both figures; empty when it serves them all.
  std::string shortfall;
};

// units(node, class): passthrough from allocatable; vGPU from the inventory's
// healthy parents (created + available slots) or allocatable; shared from the
// healthy parents in the inventory times sharesPerDevice, never more than the
// device plugin advertises (the kubelet admits no more), and `shortfall` says so
// when that bound is lower. Zero unless the node is Ready, schedulable, and
// active mode == expected mode == class.nodeMode.
NodeUnits unitsServed(const Node& node, const DeviceClass& cls);

// The first reason the node cannot serve the class at all (mode, readiness,
// cordon), or nothing when it is eligible.
std::optional<Refusal> nodeIneligibility(const Node& node, const DeviceClass& cls);

}  // namespace tally::model
