#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readHardUsed(od::value value, std::string_view field, std::optional<model::HardUsed>& out) {
  model::HardUsed amounts;
  Status status = forEachField(value, field, [&](std::string_view key, od::value entry) -> Status {
    if (key == "hard") return readCount(entry, key, amounts.hard);
    if (key == "used") return readCount(entry, key, amounts.used);
    return {};
  });
  if (!status) return status;
  out = amounts;
  return {};
}

Status readAccelerator(od::value value, model::AcceleratorUsage& usage) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "shares") return readHardUsed(field, key, usage.shares);
    if (key == "memoryMiB") return readHardUsed(field, key, usage.memoryMiB);
    if (key == "corePercent") return readHardUsed(field, key, usage.corePercent);
    if (key == "devices") return readHardUsed(field, key, usage.devices);
    return {};
  });
}

// status.quotaUsage.accelerators: profile id -> usage.
Status readStatus(od::value value, model::Organization& org) {
  return forEachField(value, "status", [&](std::string_view key, od::value quotaUsage) -> Status {
    if (key != "quotaUsage") return {};
    return forEachField(quotaUsage, key, [&](std::string_view usageKey, od::value accelerators) -> Status {
      if (usageKey != "accelerators") return {};
      return forEachField(accelerators, usageKey, [&](std::string_view profile, od::value usage) -> Status {
        Status read = readAccelerator(usage, org.acceleratorStatus[std::string(profile)]);
        if (!read) return std::move(read).error().under(keyField(profile));
        return {};
      });
    });
  });
}

}  // namespace

Result<std::vector<model::AddonAssignment>> decodeAddonAssignments(std::string_view json) {
  std::vector<model::AddonAssignment> addons;
  Status status = withEmbeddedJson(json, "", [&](od::value root) -> Status {
    return forEachElement(root, "", [&](std::size_t index, od::value element) -> Status {
      model::AddonAssignment& addon = addons.emplace_back();
      bool sawQuantity = false;
      Status read = forEachField(element, indexField(index), [&](std::string_view key, od::value field) -> Status {
        if (key == "addonId") return readString(field, key, addon.addonId);
        if (key == "quantity") {
          sawQuantity = true;
          return readCount(field, key, addon.quantity);
        }
        return {};
      });
      if (!read) return read;
      if (addon.addonId.empty()) return fieldError(joinField(indexField(index), "addonId"), "missing");
      // An assignment without a quantity is one of the add-on.
      if (!sawQuantity) addon.quantity = 1;
      return {};
    });
  });
  if (!status) return std::move(status).error();
  return addons;
}

Result<model::Organization> decodeOrganization(od::value json, ObjectMeta* out) {
  model::Organization org;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.annotation = [&](std::string_view key, std::string_view value) -> Status {
    if (key != model::kAnnotationOrgAddons) return {};
    auto addons = decodeAddonAssignments(value);
    if (!addons) return std::move(addons).error();
    org.addons = std::move(addons).value();
    return {};
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    if (key == "status") return readStatus(field, org);
    return {};
  });
  constexpr std::string_view kKind = "Organization";
  if (auto done = finished(std::move(status), kKind, meta); !done) return std::move(done).error();
  // Organizations live in their own namespace; a cluster-scoped copy names it.
  org.ns = meta.ns.empty() ? meta.name : std::move(meta.ns);
  org.name = std::move(meta.name);
  return org;
}

}  // namespace tally::codec
