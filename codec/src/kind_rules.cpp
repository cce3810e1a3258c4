#include "kind_rules.hpp"

#include <charconv>
#include <string>

#include "json_reader.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec::detail {

namespace {
constexpr std::string_view kTreeLabelSuffix = ".tree.hnc.x-k8s.io/depth";
}  // namespace

void applyNodeLabel(model::Node& node, std::string_view key, std::string_view value) {
  if (key == model::kLabelWorkloadMode) node.activeMode = model::parseNodeMode(value);
  if (key == model::kLabelExpectedWorkloadMode) node.expectedMode = model::parseNodeMode(value);
}

Status applyNodeAnnotation(model::Node& node, std::string_view key, std::string_view value) {
  if (key != model::kAnnotationInventory) return {};
  auto parents = decodeInventory(value);
  if (!parents) return std::move(parents).error();
  node.inventory = std::move(parents).value();
  return {};
}

Status applyNamespaceLabel(model::Namespace& ns, std::string_view key, std::string_view value) {
  if (key.ends_with(kTreeLabelSuffix) && key.size() > kTreeLabelSuffix.size()) {
    int depth = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), depth);
    if (error != std::errc() || end != value.data() + value.size() || depth < 0) {
      return fieldError("", "HNC depth \"" + std::string(value) + "\" is not a non-negative integer");
    }
    ns.tree[std::string(key.substr(0, key.size() - kTreeLabelSuffix.size()))] = depth;
  } else if (key.starts_with(model::kEntitlementLabelPrefix) && value == "true") {
    ns.entitledClasses.emplace_back(key.substr(model::kEntitlementLabelPrefix.size()));
  }
  return {};
}

void defaultRequestsToLimits(model::ResourceList& requests, const model::ResourceList& limits) {
  for (const auto& [name, amount] : limits) {
    if (!requests.contains(name)) requests.set(name, amount);
  }
}

void resolveTemplateClaims(model::Pod& pod, const std::vector<std::pair<std::string, std::string>>& generated) {
  for (model::PodClaim& claim : pod.claims) {
    if (!claim.claimName.empty()) continue;
    for (const auto& [entry, made] : generated) {
      if (entry == claim.name) claim.claimName = made;
    }
  }
}

}  // namespace tally::codec::detail
