#include "tally/model/units.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tally/model/dra.hpp"

namespace tally::model {

NodeMode poolMode(const Node& node) {
  return node.expectedMode == NodeMode::Unset ? node.activeMode : node.expectedMode;
}

namespace {

bool advertises(const Node& node, const DeviceClass& cls) {
  if (node.allocatable.contains(cls.resourceName)) return true;
  if (!node.inventory) return false;
  if (cls.allocation == Allocation::Shared) return !node.inventory->empty();
  return std::any_of(node.inventory->begin(), node.inventory->end(),
                     [&](const InventoryParent& p) { return p.types.contains(cls.resourceName); });
}

// Why a shared class yields no share of a device, with the figures that say so.
std::string soldNoShares(const DeviceClass& cls) {
  if (!cls.share) return fmt::format("class {} is shared but has no share policy, so it sells no shares", cls.name);
  return fmt::format(
      "class {} sells no shares of a device: min({} MiB / {} MiB, 100% / {}%, maxSharesPerDevice {}) is 0", cls.name,
      cls.memoryMiB, cls.share->memoryMiB, cls.share->corePercent, cls.share->maxSharesPerDevice);
}

}  // namespace

std::int64_t sharesPerDevice(const DeviceClass& cls) {
  if (!cls.share || cls.share->memoryMiB <= 0 || cls.share->corePercent <= 0) return 0;
  std::int64_t byMemory = cls.memoryMiB / cls.share->memoryMiB;
  std::int64_t byCores = 100 / cls.share->corePercent;
  std::int64_t limit = cls.share->maxSharesPerDevice > 0 ? cls.share->maxSharesPerDevice : byCores;
  return std::max<std::int64_t>(0, std::min({byMemory, byCores, limit}));
}

std::int64_t unitsPerDevice(const DeviceClass& cls) {
  return cls.allocation == Allocation::Shared ? sharesPerDevice(cls) : 1;
}

std::string_view quotaUnitName(const DeviceClass& cls) {
  return cls.allocation == Allocation::Shared ? "shares" : "devices";
}

bool inPool(const Node& node, const DeviceClass& cls) {
  // A DRA pool is the nodes its driver's slices put member devices on; a mode
  // label narrows it only when the class names a mode.
  if (cls.dra) return (cls.nodeMode == NodeMode::Unset || poolMode(node) == cls.nodeMode) && draInPool(node, cls);
  return poolMode(node) == cls.nodeMode && advertises(node, cls);
}

std::optional<Refusal> nodeIneligibility(const Node& node, const DeviceClass& cls) {
  NodeMode expected = poolMode(node);
  // A DRA class naming no node mode serves on any node its driver publishes.
  const bool anyMode = cls.dra && cls.nodeMode == NodeMode::Unset;
  if (!anyMode && expected != cls.nodeMode) {
    return Refusal{Code::NodeWrongMode, fmt::format("node {} is in GPU mode '{}', class {} needs '{}'", node.name,
                                                    toString(expected), cls.name, toString(cls.nodeMode))};
  }
  if (!anyMode && node.activeMode != expected) {
    return Refusal{Code::NodeModeTransition, fmt::format("node {} is switching GPU mode from '{}' to '{}'", node.name,
                                                         toString(node.activeMode), toString(expected))};
  }
  if (!node.ready) return Refusal{Code::NodeNotReady, fmt::format("node {} is not Ready", node.name)};
  if (node.unschedulable) return Refusal{Code::NodeCordoned, fmt::format("node {} is cordoned", node.name)};
  return std::nullopt;
}

NodeUnits unitsServed(const Node& node, const DeviceClass& cls) {
  NodeUnits out;
  if (auto why = nodeIneligibility(node, cls)) {
    out.notServed = std::move(why);
    return out;
  }
  if (cls.dra) {
    DraNodeUnits dra = draUnitsOn(node, cls);
    if (!dra.unknown.empty()) {
      out.notServed =
          Refusal{Code::DraPoolIncomplete,
                  fmt::format("node {} serves class {} from {}, so its devices count as unknown until every "
                              "slice is seen",
                              node.name, cls.name, fmt::join(dra.unknown, "; "))};
      return out;
    }
    out.units = dra.units;
    out.devices = dra.devices;
    if (out.units == 0) {
      out.notServed = Refusal{Code::NodeNotServed,
                              dra.unhealthy.empty()
                                  ? fmt::format("node {} has no healthy device of driver {} for class {}", node.name,
                                                cls.dra->driver, cls.name)
                                  : fmt::format("node {} has no healthy device of driver {} for class {} ({})",
                                                node.name, cls.dra->driver, cls.name, fmt::join(dra.unhealthy, "; "))};
    }
    return out;
  }
  switch (cls.allocation) {
    case Allocation::Passthrough:
      out.units = out.devices = std::max<std::int64_t>(0, node.allocatable.get(cls.resourceName));
      break;
    case Allocation::Vgpu:
      if (node.inventory) {
        // Slots of healthy parents keep serving when another function of the
        // node is unhealthy: the mdev parent's remaining slots still count.
        for (const auto& parent : *node.inventory) {
          if (!parent.healthy) continue;
          auto it = parent.types.find(cls.resourceName);
          if (it != parent.types.end())
            out.units += std::max<std::int64_t>(0, it->second.created + it->second.available);
        }
      } else {
        out.units = std::max<std::int64_t>(0, node.allocatable.get(cls.resourceName));
      }
      out.devices = out.units;
      break;
    case Allocation::Shared: {
      if (!node.inventory) {
        out.notServed = Refusal{Code::NodeNoInventory,
                                fmt::format("node {} has no {} annotation, so it serves no shared units of {}",
                                            node.name, kAnnotationInventory, cls.name)};
        return out;
      }
      std::int64_t healthy = std::count_if(node.inventory->begin(), node.inventory->end(),
                                           [](const InventoryParent& p) { return p.healthy; });
      out.devices = healthy;
      const std::int64_t perDevice = sharesPerDevice(cls);
      if (perDevice == 0) {
        out.notServed = Refusal{Code::NodeNotServed, soldNoShares(cls)};
        return out;
      }
      const std::int64_t yielded = healthy * perDevice;
      // The kubelet admits no more pods than the device plugin advertises slots,
      // so a lower advertisement bounds the figure, and says so.
      const std::int64_t advertised = std::max<std::int64_t>(0, node.allocatable.get(cls.resourceName));
      out.units = std::min(yielded, advertised);
      if (out.units > 0 && out.units < yielded) {
        out.shortfall = fmt::format(
            "node {} advertises {} {}, fewer than its {} healthy GPU(s) x {} shares of class {} ({}), so it serves {}; "
            "its device plugin must offer at least {} slots per GPU",
            node.name, advertised, cls.resourceName, healthy, perDevice, cls.name, yielded, out.units, perDevice);
      }
      break;
    }
  }
  if (out.units == 0 && !out.notServed) {
    out.notServed = Refusal{Code::NodeNotServed, fmt::format("node {} advertises no healthy {} for class {}", node.name,
                                                             cls.resourceName, cls.name)};
  }
  return out;
}

}  // namespace tally::model
