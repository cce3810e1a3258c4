#include "tally/model/fit_table.hpp"

#include <algorithm>

#include "filter_core.hpp"
#include "tally/model/units.hpp"

namespace tally::model {

FitTable FitTable::build(const Cluster& cluster, const CapacityView& view) {
  FitTable t;
  for (const auto& [name, cls] : cluster.classes) {
    t.classes_.push_back(&cls);
    if (std::find(t.resources_.begin(), t.resources_.end(), cls.resourceName) == t.resources_.end()) {
      t.resources_.push_back(cls.resourceName);
    }
  }
  const std::size_t width = t.resources_.size();
  t.names_.reserve(cluster.nodes.size());
  t.nodes_.reserve(cluster.nodes.size());
  t.slots_.resize(cluster.nodes.size() * width);
  t.rows_.reserve(cluster.nodes.size());
  std::uint32_t row = 0;
  for (const auto& [name, node] : cluster.nodes) {
    t.names_.push_back(name);
    t.nodes_.push_back(&node);
    t.rows_.emplace(name, row);
    for (std::size_t r = 0; r < width; ++r) {
      Slot& slot = t.slots_[row * width + r];
      const DeviceClass* cls = classServing(cluster, node, t.resources_[r]);
      if (!cls) continue;
      slot.cls = static_cast<std::int32_t>(std::find(t.classes_.begin(), t.classes_.end(), cls) - t.classes_.begin());
      slot.eligible = !nodeIneligibility(node, *cls);
      slot.served = unitsServed(node, *cls).units;
      slot.used = view.nodeUsed(name, t.resources_[r]);
      slot.held = view.nodeHeld(name, t.resources_[r]);
    }
    ++row;
  }
  return t;
}

std::optional<std::uint32_t> FitTable::find(std::string_view node) const {
  auto it = rows_.find(node);
  if (it == rows_.end()) return std::nullopt;
  return it->second;
}

NodeVerdict FitTable::filter(const Cluster& cluster, const PodDemand& demand, std::uint32_t row) const {
  const std::size_t width = resources_.size();
  return detail::decideNode(
      cluster, demand, names_[row],
      [&](std::string_view resource) {
        detail::ResourceFacts facts;
        for (std::size_t r = 0; r < width; ++r) {
          if (resources_[r] != resource) continue;
          const Slot& slot = slots_[row * width + r];
          if (slot.cls < 0) break;
          facts.cls = classes_[static_cast<std::size_t>(slot.cls)];
          facts.eligible = slot.eligible;
          facts.served = slot.served;
          facts.used = slot.used;
          facts.held = slot.held;
          break;
        }
        return facts;
      },
      [&]() -> const Node& { return *nodes_[row]; });
}

}  // namespace tally::model
