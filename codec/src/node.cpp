#include <string>

#include "kind_rules.hpp"
#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

Status readSlots(od::value value, model::VgpuSlots& slots) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "total") return readCount(field, key, slots.total);
    if (key == "created") return readCount(field, key, slots.created);
    if (key == "available") return readCount(field, key, slots.available);
    return {};
  });
}

Status readParent(od::value value, model::InventoryParent& parent) {
  bool sawHealthy = false;
  Status status = forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "id") return readString(field, key, parent.id);
    if (key == "healthy") {
      sawHealthy = true;
      return readBool(field, key, parent.healthy);
    }
    if (key == "types") {
      return forEachField(field, key, [&](std::string_view type, od::value slots) -> Status {
        Status read = readSlots(slots, parent.types[std::string(type)]);
        if (!read) return std::move(read).error().under(keyField(type));
        return {};
      });
    }
    return {};
  });
  if (!status) return status;
  // A parent that does not say it is healthy serves nothing.
  if (!sawHealthy) parent.healthy = false;
  return {};
}

Status readInventory(od::value root, std::vector<model::InventoryParent>& parents) {
  bool sawParents = false;
  Status status = forEachField(root, "", [&](std::string_view key, od::value field) -> Status {
    if (key != "parents") return {};
    sawParents = true;
    return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
      Status read = readParent(element, parents.emplace_back());
      if (!read) return std::move(read).error().under(indexField(index));
      return {};
    });
  });
  if (!status) return status;
  if (!sawParents) return fieldError("parents", "missing");
  return {};
}

Status readCondition(od::value value, std::string& type, std::string& conditionStatus) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "type") return readString(field, key, type);
    if (key == "status") return readString(field, key, conditionStatus);
    return {};
  });
}

Status readNodeStatus(od::value value, model::Node& node) {
  return forEachField(value, "status", [&](std::string_view key, od::value field) -> Status {
    if (key == "allocatable") return readResources(field, key, model::isExtendedResourceName, node.allocatable);
    if (key == "capacity") return readResources(field, key, model::isExtendedResourceName, node.capacity);
    if (key == "conditions") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        std::string type;
        std::string conditionStatus;
        Status read = readCondition(element, type, conditionStatus);
        if (!read) return std::move(read).error().under(indexField(index));
        if (type == "Ready") node.ready = conditionStatus == "True";
        return {};
      });
    }
    return {};
  });
}

}  // namespace

Result<std::vector<model::InventoryParent>> decodeInventory(std::string_view json) {
  std::vector<model::InventoryParent> parents;
  Status status = withEmbeddedJson(json, "", [&](od::value root) { return readInventory(root, parents); });
  if (!status) return std::move(status).error();
  return parents;
}

Result<model::Node> decodeNode(od::value json, ObjectMeta* out) {
  model::Node node;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.label = [&](std::string_view key, std::string_view value) -> Status {
    applyNodeLabel(node, key, value);
    return {};
  };
  hooks.annotation = [&](std::string_view key, std::string_view value) {
    return applyNodeAnnotation(node, key, value);
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") {
      Status read = readMetadata(field, meta, hooks);
      node.name = meta.name;
      return read;
    }
    if (key == "spec") {
      return forEachField(field, key, [&](std::string_view specKey, od::value specField) -> Status {
        if (specKey == "unschedulable") return readBool(specField, specKey, node.unschedulable);
        return {};
      });
    }
    if (key == "status") return readNodeStatus(field, node);
    return {};
  });
  if (auto done = finished(std::move(status), "Node", meta); !done) return std::move(done).error();
  return node;
}

}  // namespace tally::codec
