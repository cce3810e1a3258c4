#include <charconv>
#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

constexpr std::string_view kTreeLabelSuffix = ".tree.hnc.x-k8s.io/depth";

}  // namespace

Result<model::Namespace> decodeNamespace(od::value json, ObjectMeta* out) {
  model::Namespace ns;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.label = [&](std::string_view key, std::string_view value) -> Status {
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
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    return {};
  });
  if (!status) return inObject(std::move(status).error(), "Namespace", meta);
  if (meta.name.empty()) return inObject(fieldError("metadata.name", "missing"), "Namespace", meta);
  ns.name = std::move(meta.name);
  ns.deleting = meta.deleting;
  return ns;
}

}  // namespace tally::codec
