#include <string>

#include <yaml-cpp/yaml.h>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"
#include "tally/common/quantity.hpp"
#include "yaml_guard.hpp"

namespace tally::codec {
namespace {

using namespace detail;

constexpr std::string_view kPlansKey = "plans.yaml";

std::string scalarOf(const YAML::Node& node) { return node.IsScalar() ? node.Scalar() : std::string(); }

Status yamlCount(const YAML::Node& node, const std::string& field, std::int64_t& out) {
  if (node.IsNull()) return {};
  if (!node.IsScalar()) return fieldError(field, "expected a whole number");
  auto parsed = parseWholeQuantity(node.Scalar());
  if (!parsed) return fieldError(field, describeQuantityError(node.Scalar(), parsed.error()));
  std::int64_t amount = *parsed;
  if (amount < 0) return fieldError(field, "negative amount " + std::to_string(amount));
  out = amount;
  return {};
}

Status yamlBool(const YAML::Node& node, const std::string& field, bool& out) {
  if (node.IsNull()) return {};
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    return fieldError(field, "expected true or false, got \"" + scalarOf(node) + "\"");
  }
  out = value;
  return {};
}

Status yamlGrant(const YAML::Node& node, const std::string& field, model::GpuGrant& grant) {
  if (node.IsNull()) return {};
  if (!node.IsMap()) return fieldError(field, "expected a map");
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    const std::string path = field + "." + key;
    Status status;
    if (key == "devices") status = yamlCount(entry.second, path, grant.devices);
    if (key == "shares") status = yamlCount(entry.second, path, grant.shares);
    if (key == "memoryMiB") status = yamlCount(entry.second, path, grant.memoryMiB);
    if (key == "corePercent") status = yamlCount(entry.second, path, grant.corePercent);
    if (!status) return status;
  }
  return {};
}

Status yamlAddon(const YAML::Node& node, const std::string& field, model::Addon& addon) {
  if (node.IsNull()) return {};
  if (!node.IsMap()) return fieldError(field, "expected a map");
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    const std::string path = field + "." + key;
    Status status;
    if (key == "disabled") status = yamlBool(entry.second, path, addon.disabled);
    if (key == "selfService") status = yamlBool(entry.second, path, addon.selfService);
    if (key == "gpu") {
      if (entry.second.IsNull()) continue;
      if (!entry.second.IsMap()) return fieldError(path, "expected a map of profile id to grant");
      for (const auto& profile : entry.second) {
        const std::string profileId = profile.first.as<std::string>();
        status = yamlGrant(profile.second, path + "." + profileId, addon.gpu[profileId]);
        if (!status) return status;
      }
    }
    if (!status) return status;
  }
  return {};
}

Status yamlPlans(const YAML::Node& root, model::BillingPlans& plans) {
  if (root.IsNull()) return {};
  if (!root.IsMap()) return fieldError("", "expected a map with an addons key");
  const YAML::Node addons = root["addons"];
  if (!addons || addons.IsNull()) return {};
  if (!addons.IsMap()) return fieldError("addons", "expected a map of add-on id to add-on");
  for (const auto& entry : addons) {
    const std::string id = entry.first.as<std::string>();
    model::Addon addon;
    addon.id = id;
    if (auto status = yamlAddon(entry.second, "addons." + id, addon); !status) return status;
    plans.addons[id] = std::move(addon);
  }
  return {};
}

}  // namespace

std::string BillingPlansLocation::describe() const { return ns + "/" + name; }

Result<BillingPlansLocation> parseBillingPlansLocation(std::string_view namespacedName) {
  const auto slash = namespacedName.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == namespacedName.size() ||
      namespacedName.find('/', slash + 1) != std::string_view::npos) {
    DecodeError error;
    error.item = "billing plans ConfigMap";
    error.message = "\"" + std::string(namespacedName) + "\" is not namespace/name";
    return error;
  }
  return BillingPlansLocation{std::string(namespacedName.substr(0, slash)),
                              std::string(namespacedName.substr(slash + 1))};
}

Result<model::BillingPlans> decodeBillingPlansYaml(std::string_view yaml) {
  model::BillingPlans plans;
  if (auto why = yamlExpansionRefusal(yaml)) return fieldError("", *why);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    if (auto status = yamlPlans(root, plans); !status) return std::move(status).error();
  } catch (const std::exception& e) {
    return fieldError("", std::string("malformed YAML: ") + e.what());
  }
  return plans;
}

Result<std::optional<model::BillingPlans>> decodeBillingPlansConfigMap(od::value json, ObjectMeta* out,
                                                                       const BillingPlansLocation& location) {
  Metadata meta;
  meta.sink = out;
  std::optional<std::string> plansYaml;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key != "data") return {};
    return forEachField(field, key, [&](std::string_view dataKey, od::value entry) -> Status {
      if (dataKey != kPlansKey) return {};
      return readString(entry, keyField(dataKey), plansYaml.emplace());
    });
  });
  if (!status) return inObject(std::move(status).error(), "ConfigMap", meta);
  if (meta.ns != location.ns || meta.name != location.name) return std::optional<model::BillingPlans>();
  if (!plansYaml) return inObject(fieldError("data[plans.yaml]", "missing"), "ConfigMap", meta);
  auto plans = decodeBillingPlansYaml(*plansYaml);
  if (!plans) return inObject(std::move(plans).error().under("data[plans.yaml]"), "ConfigMap", meta);
  return std::optional<model::BillingPlans>(std::move(plans).value());
}

}  // namespace tally::codec
