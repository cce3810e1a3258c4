#include "tally/codec/snapshot.hpp"

#include <string>

#include "json_reader.hpp"
#include "tally/codec/dra_objects.hpp"
#include "tally/codec/objects.hpp"
#include "tally/model/dra.hpp"

namespace tally::codec {
namespace {

using namespace detail;

std::string_view groupOf(std::string_view apiVersion) {
  auto slash = apiVersion.find('/');
  return slash == std::string_view::npos ? std::string_view() : apiVersion.substr(0, slash);
}

// What an object says of its own type: its apiVersion and kind (or the implied
// ones where it has none), and whether it is empty.
struct ObjectType {
  TypeMeta type;
  bool empty = false;
};

// Reads apiVersion and kind wherever they are in the object, then rewinds it
// so a decoder can read the object again from its first field. An empty object
// cannot be rewound (simdjson has already left it), so it is reported instead.
Result<ObjectType> readTypeMeta(od::value& json, TypeMeta implied) {
  ObjectType result{std::move(implied)};
  TypeMeta& type = result.type;
  od::object object;
  if (auto code = json.get_object().get(object)) return jsonError(code, "", "an object");
  for (auto [name, out] : {std::pair<std::string_view, std::string*>{"apiVersion", &type.apiVersion},
                           std::pair<std::string_view, std::string*>{"kind", &type.kind}}) {
    od::value field;
    auto code = object.find_field_unordered(name).get(field);
    if (code == simdjson::NO_SUCH_FIELD) continue;
    if (code) return jsonError(code, name, "a string");
    if (auto read = readString(field, name, *out); !read) return std::move(read).error();
  }
  bool hasFields = false;
  if (auto code = object.reset().get(hasFields)) return jsonError(code, "", "an object");
  result.empty = !hasFields;
  return result;
}

template <class T>
Status insertUnique(std::map<std::string, T>& objects, std::string key, T object, std::string_view kind) {
  auto [it, inserted] = objects.try_emplace(key, std::move(object));
  if (!inserted) {
    DecodeError error = fieldError("metadata.name", "duplicate object in the snapshot");
    error.item = std::string(kind) + " " + key;
    return error;
  }
  return {};
}

// The cluster's key: "namespace/name" for namespaced kinds, the name otherwise.
template <class T>
std::string keyOf(const T& object) {
  if constexpr (requires { object.ns; }) {
    return model::objectKey(object.ns, object.name);
  } else {
    return object.name;
  }
}

template <class T, class Decoder>
Status decodeKeyed(std::map<std::string, T>& objects, od::value json, Decoder decode, std::string_view kind) {
  auto object = decode(json, nullptr);
  if (!object) return std::move(object).error();
  std::string key = keyOf(*object);
  return insertUnique(objects, std::move(key), std::move(object).value(), kind);
}

void count(std::map<std::string, std::size_t>& counts, std::string_view kind) {
  ++counts[kind.empty() ? std::string("(no kind)") : std::string(kind)];
}

Status addItems(Snapshot& snapshot, od::value items, const TypeMeta& implied, const SnapshotOptions& options);

}  // namespace

namespace {

bool isKnownKind(std::string_view group, std::string_view kind) {
  if (group.empty()) {
    return kind == "Node" || kind == "Pod" || kind == "Namespace" || kind == "ResourceQuota" || kind == "ConfigMap";
  }
  if (group == "hnc.x-k8s.io") return kind == "HierarchicalResourceQuota";
  if (group == "gpu.tally.dev") return kind == "GPUDeviceClass" || kind == "GPUDevice";
  if (group == "kubevirt.io") return kind == "VirtualMachineInstance" || kind == "KubeVirt";
  if (group == "kube-dc.com") return kind == "Organization";
  if (group == "resource.k8s.io")
    return kind == "ResourceSlice" || kind == "ResourceClaim" || kind == "DeviceTaintRule";
  return false;
}

// Decodes an object whose type is already known. `json` has been rewound by
// readTypeMeta; an empty object is never read again.
Status addTypedObject(Snapshot& snapshot, od::value json, const TypeMeta& type, bool empty,
                      const SnapshotOptions& options) {
  if (type.kind.empty()) return fieldError("kind", "missing");
  const std::string_view group = groupOf(type.apiVersion);
  const std::string_view kind = type.kind;
  model::Cluster& cluster = snapshot.cluster;
  if (!isKnownKind(group, kind)) {
    count(snapshot.skipped, kind);
    return {};
  }
  if (empty) {
    DecodeError error = fieldError("metadata.name", "missing");
    error.item = std::string(kind);
    return error;
  }

  Status status;
  if (group.empty() && kind == "Node") {
    status = decodeKeyed(cluster.nodes, json, decodeNode, kind);
  } else if (group.empty() && kind == "Pod") {
    status = decodeKeyed(cluster.pods, json, decodePod, kind);
  } else if (group.empty() && kind == "Namespace") {
    status = decodeKeyed(cluster.namespaces, json, decodeNamespace, kind);
  } else if (group.empty() && kind == "ResourceQuota") {
    status = decodeKeyed(cluster.quotas, json, decodeResourceQuota, kind);
  } else if (group == "hnc.x-k8s.io" && kind == "HierarchicalResourceQuota") {
    status = decodeKeyed(cluster.hrqs, json, decodeHierarchicalResourceQuota, kind);
  } else if (group == "gpu.tally.dev" && kind == "GPUDeviceClass") {
    status = decodeKeyed(cluster.classes, json, decodeDeviceClass, kind);
  } else if (group == "gpu.tally.dev" && kind == "GPUDevice") {
    status = decodeKeyed(cluster.devices, json, decodeGpuDevice, kind);
  } else if (group == "kubevirt.io" && kind == "VirtualMachineInstance") {
    status = decodeKeyed(cluster.vmis, json, decodeVirtualMachineInstance, kind);
  } else if (group == "kube-dc.com" && kind == "Organization") {
    status = decodeKeyed(cluster.organizations, json, decodeOrganization, kind);
  } else if (group == "resource.k8s.io" && kind == "ResourceSlice") {
    status = decodeKeyed(cluster.resourceSlices, json, decodeResourceSlice, kind);
  } else if (group == "resource.k8s.io" && kind == "ResourceClaim") {
    status = decodeKeyed(cluster.resourceClaims, json, decodeResourceClaim, kind);
  } else if (group == "resource.k8s.io" && kind == "DeviceTaintRule") {
    status = decodeKeyed(cluster.deviceTaintRules, json, decodeDeviceTaintRule, kind);
  } else if (group == "kubevirt.io" && kind == "KubeVirt") {
    auto devices = decodeKubeVirt(json);
    if (!devices) return std::move(devices).error();
    auto& permitted = cluster.permittedHostDevices;
    if (!permitted) permitted.emplace();
    permitted->insert(permitted->end(), devices->begin(), devices->end());
  } else if (group.empty() && kind == "ConfigMap") {
    auto plans = decodeBillingPlansConfigMap(json, nullptr, options.billingPlans);
    if (!plans) return std::move(plans).error();
    if (!plans->has_value()) {
      count(snapshot.skipped, kind);
      return {};
    }
    if (cluster.plans) {
      DecodeError error = fieldError("metadata.name", "duplicate object in the snapshot");
      error.item = "ConfigMap " + options.billingPlans.describe();
      return error;
    }
    cluster.plans = std::move(plans->value());
  } else {
    count(snapshot.skipped, kind);
    return {};
  }
  if (!status) return status;
  count(snapshot.decoded, kind);
  return {};
}

}  // namespace

Status addObject(Snapshot& snapshot, od::value json, const TypeMeta& implied, const SnapshotOptions& options) {
  auto read = readTypeMeta(json, implied);
  if (!read) return std::move(read).error();
  return addTypedObject(snapshot, json, read->type, read->empty, options);
}

namespace {

Status addItems(Snapshot& snapshot, od::value items, const TypeMeta& implied, const SnapshotOptions& options) {
  auto null = isNull(items, "items");
  if (!null) return std::move(null).error();
  if (*null) return {};
  od::array array;
  if (auto code = items.get_array().get(array)) return jsonError(code, "items", "an array");
  std::size_t index = 0;
  for (auto entry : array) {
    const std::string place = "items" + indexField(index);
    od::value item;
    if (auto code = std::move(entry).get(item)) return jsonError(code, "", "an object").within(place);
    Status added = addObject(snapshot, item, implied, options);
    if (!added) return std::move(added).error().within(place);
    ++index;
  }
  return {};
}

}  // namespace

Result<Snapshot> loadSnapshot(std::string_view json, const SnapshotOptions& options) {
  Snapshot snapshot;
  Status status = withJsonValue(json, "", [&](od::value root) -> Status {
    auto read = readTypeMeta(root, {});
    if (!read) return std::move(read).error().within("snapshot");
    const TypeMeta& listType = read->type;
    if (!listType.kind.ends_with("List")) return addTypedObject(snapshot, root, listType, read->empty, options);
    if (read->empty) return fieldError("items", "missing").within("snapshot " + listType.kind);
    // Items of a typed list (NodeList) carry no kind of their own.
    TypeMeta implied;
    if (listType.kind != "List") {
      implied.apiVersion = listType.apiVersion;
      implied.kind = listType.kind.substr(0, listType.kind.size() - 4);
    }
    bool sawItems = false;
    Status items = forEachField(root, "", [&](std::string_view key, od::value field) -> Status {
      if (key != "items") return {};
      sawItems = true;
      return addItems(snapshot, field, implied, options);
    });
    if (!items) return items;
    if (!sawItems) return fieldError("items", "missing").within("snapshot " + listType.kind);
    return {};
  });
  if (!status) {
    DecodeError error = std::move(status).error();
    if (error.item.empty()) error.item = "snapshot";
    return error;
  }
  model::foldDraInventory(snapshot.cluster);
  return snapshot;
}

}  // namespace tally::codec
