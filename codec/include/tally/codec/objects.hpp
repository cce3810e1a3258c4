#pragma once
// simdjson on-demand decoders from Kubernetes JSON objects into the model's
// value types. One function per kind, free of I/O and of any List wrapper: the
// snapshot loader of tallyctl and the informers call the same functions.
//
// Each decoder reads only the fields the model needs, in whatever order they
// come, and fails with a DecodeError naming the object and the field path.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "tally/codec/result.hpp"
#include "tally/common/condition.hpp"
#include "tally/common/object_meta.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec {

// The identity of a decoded object (the tree's one ObjectMeta, its core part:
// no labels, annotations or owners), for an informer's store and its
// resourceVersion bookkeeping. Filled when the decoder is given one, also when
// decoding fails after metadata was read (so a broken object can be named).
using ObjectMeta = tally::ObjectMeta;

Result<model::Node> decodeNode(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
Result<model::Pod> decodePod(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
// How decodePodWith reads a pod: at a CREATE by generateName the pod has no
// metadata.name yet (the API server names it after admission), which
// allowGenerateName accepts (the pod's name is then empty).
struct PodDecodeOptions {
  bool allowGenerateName = false;
};
Result<model::Pod> decodePodWith(simdjson::ondemand::value json, const PodDecodeOptions& options,
                                 ObjectMeta* meta = nullptr);
Result<model::Namespace> decodeNamespace(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
Result<model::HierarchicalResourceQuota> decodeHierarchicalResourceQuota(simdjson::ondemand::value json,
                                                                         ObjectMeta* meta = nullptr);
Result<model::ResourceQuota> decodeResourceQuota(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
Result<model::DeviceClass> decodeDeviceClass(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
Result<model::GpuDevice> decodeGpuDevice(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
// A GPUDevice as the device binder reads it before it writes: the model's
// value, its metadata with finalizers, and status.conditions.
struct GpuDeviceRecord {
  model::GpuDevice device;
  ObjectMeta meta;
  std::vector<Condition> conditions;
};
Result<GpuDeviceRecord> decodeGpuDeviceRecord(simdjson::ondemand::value json);
Result<model::VirtualMachineInstance> decodeVirtualMachineInstance(simdjson::ondemand::value json,
                                                                   ObjectMeta* meta = nullptr);
Result<model::Organization> decodeOrganization(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
// The permittedHostDevices of a KubeVirt CR (PCI and mediated, in that order).
Result<std::vector<model::PermittedHostDevice>> decodeKubeVirt(simdjson::ondemand::value json,
                                                               ObjectMeta* meta = nullptr);

// Which ConfigMap holds the add-on catalogue (key `plans.yaml`). It is
// configuration (tally-extender and tallyctl --billing-plans): a platform may
// keep it elsewhere than kube-dc/billing-plans.
struct BillingPlansLocation {
  std::string ns = "kube-dc";
  std::string name = "billing-plans";
  std::string describe() const;  // "namespace/name"
  friend bool operator==(const BillingPlansLocation&, const BillingPlansLocation&) = default;
};

// Reads "namespace/name"; the error names the text when either half is missing.
Result<BillingPlansLocation> parseBillingPlansLocation(std::string_view namespacedName);

// A ConfigMap: the add-on catalogue when it is the one at `location`, nothing
// for any other ConfigMap.
Result<std::optional<model::BillingPlans>> decodeBillingPlansConfigMap(simdjson::ondemand::value json,
                                                                       ObjectMeta* meta = nullptr,
                                                                       const BillingPlansLocation& location = {});

// The `plans.yaml` document of the billing-plans ConfigMap.
Result<model::BillingPlans> decodeBillingPlansYaml(std::string_view yaml);

// The node annotation gpu.tally.dev/inventory: {"parents":[{id, healthy, types}]}.
Result<std::vector<model::InventoryParent>> decodeInventory(std::string_view json);

// VMI annotations: gpu.tally.dev/devices (a JSON list of names, or names
// separated by commas) and gpu.tally.dev/device-templates (JSON [{class, count}]).
Result<std::vector<std::string>> decodeDeviceNames(std::string_view text);
Result<std::vector<model::DeviceTemplate>> decodeDeviceTemplates(std::string_view json);

// Organization annotation billing.kube-dc.com/addons: JSON [{addonId, quantity}].
Result<std::vector<model::AddonAssignment>> decodeAddonAssignments(std::string_view json);

}  // namespace tally::codec
