#pragma once
// Slim value types of the Kubernetes objects the model reads. Decoders fill
// them from JSON or protobuf; nothing here knows a wire format.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tally/model/dra_objects.hpp"
#include "tally/model/resources.hpp"

namespace tally::model {

// Seconds since the Unix epoch. The model never reads a clock: callers pass one.
using Timestamp = std::int64_t;

enum class NodeMode { Unset, Disabled, PodHami, PodHamiDra, VmPassthrough, VmVgpu, Unknown };
std::string_view toString(NodeMode mode);
NodeMode parseNodeMode(std::string_view text);  // "" -> Unset; unrecognised -> Unknown

inline constexpr std::string_view kLabelWorkloadMode = "kube-dc.com/gpu.workload-mode";
inline constexpr std::string_view kLabelExpectedWorkloadMode = "kube-dc.com/gpu.expected-workload-mode";
inline constexpr std::string_view kAnnotationInventory = "gpu.tally.dev/inventory";
inline constexpr std::string_view kAnnotationVmiDevices = "gpu.tally.dev/devices";
inline constexpr std::string_view kAnnotationVmiDeviceTemplates = "gpu.tally.dev/device-templates";
// On a VMI: the token of its devices' attachment, written by the VMI webhook
// in its answer (so the reinvoked webhook and the reconciler recognise it).
inline constexpr std::string_view kAnnotationVmiAttachment = "gpu.tally.dev/attachment";
// On a GPUDevice the VMI webhook created from a device template: JSON
// {"vmi","token","set","since"}, its attachment from its first moment.
inline constexpr std::string_view kAnnotationTemplateOf = "gpu.tally.dev/template-of";
inline constexpr std::string_view kAnnotationOrgAddons = "billing.kube-dc.com/addons";
inline constexpr std::string_view kEntitlementLabelPrefix = "gpu.tally.dev/entitled-";
inline constexpr std::string_view kOrgQuotaName = "plan-quota";
inline constexpr std::string_view kProjectQuotaName = "project-quota";

struct VgpuSlots {
  std::int64_t total = 0;
  std::int64_t created = 0;
  std::int64_t available = 0;
  friend bool operator==(const VgpuSlots&, const VgpuSlots&) = default;
};

// One physical GPU (a vGPU parent) as reported in the inventory annotation.
struct InventoryParent {
  std::string id;
  bool healthy = false;
  std::map<std::string, VgpuSlots> types;  // vGPU resource name -> slots
  friend bool operator==(const InventoryParent&, const InventoryParent&) = default;
};

struct Node {
  std::string name;
  NodeMode activeMode = NodeMode::Unset;
  NodeMode expectedMode = NodeMode::Unset;
  bool ready = false;
  bool unschedulable = false;
  ResourceList capacity;                                  // extended resources only
  ResourceList allocatable;                               // extended resources only
  std::optional<std::vector<InventoryParent>> inventory;  // absent without annotation
  // What DRA drivers publish for the node (ResourceSlices), folded in by
  // foldDraInventory: never decoded from the Node itself.
  std::vector<DraNodeSlice> dra;
  friend bool operator==(const Node&, const Node&) = default;
};

enum class Workload { Vm, Pod };
enum class Allocation { Passthrough, Vgpu, Shared };
std::string_view toString(Workload w);
std::string_view toString(Allocation a);

struct SharePolicy {
  std::int64_t memoryMiB = 0;
  std::int64_t corePercent = 0;
  std::int64_t maxSharesPerDevice = 0;
  friend bool operator==(const SharePolicy&, const SharePolicy&) = default;
};

// A person's acknowledgement of a failed audit (spec.gateAcknowledgements).
struct GateAcknowledgement {
  std::string failureId;
  std::string role;  // "product" | "sre"
  std::string identity;
  friend bool operator==(const GateAcknowledgement&, const GateAcknowledgement&) = default;
};

// GPUDeviceClass: one profile pool.
struct DeviceClass {
  std::string name;
  Workload workload = Workload::Vm;
  Allocation allocation = Allocation::Passthrough;
  std::string resourceName;
  NodeMode nodeMode = NodeMode::VmPassthrough;
  std::int64_t memoryMiB = 0;
  std::int64_t maxCount = 1;
  bool requiresEntitlement = false;
  std::optional<SharePolicy> share;
  std::optional<std::int64_t> operatorSpareDevices;
  bool singleDevicePilotApproved = false;
  std::string pciVendorSelector;
  // spec.dra: the pool is served by a DRA driver's ResourceSlices and used by
  // ResourceClaims (model/dra.hpp), not by a device plugin's node resources.
  std::optional<DraSelection> dra;
  // spec.creationPaused: an operator closes creation in the pool by hand (e.g.
  // before a sequential node switches modes).
  bool creationPaused = false;
  // spec.keepCreationOpenDuringTransactions: opt out of the freeze that closes
  // creation while a reservation transaction (pending or releasing record) is in
  // flight in the pool.
  bool keepCreationOpenDuringTransactions = false;
  bool deleting = false;
  std::vector<GateAcknowledgement> acknowledgements;
  // Last gate decision the controller published (status), so a closed gate
  // stays closed until acknowledged.
  std::string gateFailureId;
  // Whether a CreationOpen condition is published at all: a class no auditor
  // has decided yet is closed at every door (applyDoorGates). The codec reads
  // it from the status; objects built in code are decided and open.
  bool gateDecided = true;
  bool gateOpen = true;
  std::string gateReason;  // the CreationOpen condition's message
  friend bool operator==(const DeviceClass&, const DeviceClass&) = default;
};

// The node mode that serves an allocation when the class does not name one.
NodeMode defaultNodeMode(Allocation allocation);

enum class PodPhase { Pending, Running, Succeeded, Failed, Unknown };
PodPhase parsePodPhase(std::string_view text);

struct InitContainer {
  ResourceList requests;
  bool restartable = false;  // restartPolicy: Always (a sidecar)
  friend bool operator==(const InitContainer&, const InitContainer&) = default;
};

struct OwnerReference {
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  std::string apiVersion;  // "kubevirt.io/v1": a kind is only proof within its group
  friend bool operator==(const OwnerReference&, const OwnerReference&) = default;
};

// One entry of a pod's spec.resourceClaims: the ResourceClaim it names
// (resourceClaimName), or the one kube-controller-manager made from its
// template (status.resourceClaimStatuses; empty until then).
struct PodClaim {
  std::string name;       // the entry's name in the pod
  std::string claimName;  // the ResourceClaim in the pod's namespace ("" not made yet)
  std::string templateName;
  friend bool operator==(const PodClaim&, const PodClaim&) = default;
};

struct Pod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string nodeName;
  PodPhase phase = PodPhase::Pending;
  std::vector<ResourceList> containers;  // GPU requests per app container
  std::vector<InitContainer> initContainers;
  ResourceList overhead;
  bool hasResourceClaims = false;
  std::vector<PodClaim> claims;        // spec.resourceClaims, resolved by status
  std::vector<OwnerReference> owners;  // informative only: never proof of anything
  std::string schedulerName;
  friend bool operator==(const Pod&, const Pod&) = default;
};

struct Namespace {
  std::string name;
  // HNC tree labels: ancestor name -> depth (itself at 0).
  std::map<std::string, int> tree;
  std::vector<std::string> entitledClasses;  // from gpu.tally.dev/entitled-<class>: "true"
  bool deleting = false;
  friend bool operator==(const Namespace&, const Namespace&) = default;
};

struct HierarchicalResourceQuota {
  std::string ns;
  std::string name;
  ResourceList hard;        // spec.hard
  ResourceList statusHard;  // status.hard
  ResourceList statusUsed;  // status.used (authoritative usage by HNC)
  friend bool operator==(const HierarchicalResourceQuota&, const HierarchicalResourceQuota&) = default;
};

struct ResourceQuota {
  std::string ns;
  std::string name;
  ResourceList hard;
  ResourceList used;
  friend bool operator==(const ResourceQuota&, const ResourceQuota&) = default;
};

enum class DevicePhase { Pending, Bound, Attached, Lost, Released };
std::string_view toString(DevicePhase p);
std::optional<DevicePhase> parseDevicePhase(std::string_view text);  // "" -> Pending

struct ObjectRef {
  std::string ns;
  std::string name;
  std::string uid;
  bool empty() const { return name.empty() && uid.empty(); }
  friend bool operator==(const ObjectRef&, const ObjectRef&) = default;
};

// GPUDevice: a held order of `count` GPUs of one class, placed on one node.
struct GpuDevice {
  std::string ns;
  std::string name;
  std::string uid;
  std::string className;
  std::int64_t count = 1;
  DevicePhase phase = DevicePhase::Pending;
  std::string node;
  ObjectRef attachedTo;
  // The attachment the VMI webhook recorded with attachedTo (status.attachedTo
  // .token, .set, .since): the token the VMI carries until its uid is known,
  // every member of the VMI's device set, and when it was attached.
  std::string attachToken;
  std::vector<std::string> attachSet;
  Timestamp attachedAt = 0;
  bool fromTemplate = false;  // created by the VMI webhook from a template: deleted with its VMI
  bool deleting = false;
  Timestamp created = 0;
  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

// Whether the device occupies units of its node (Bound or Attached with a node).
bool holdsNodeUnits(const GpuDevice& d);
// Whether the device still counts against its tenant's budget (not Released).
bool countsAgainstBudget(const GpuDevice& d);

struct DeviceTemplate {
  std::string className;
  std::int64_t count = 1;
  friend bool operator==(const DeviceTemplate&, const DeviceTemplate&) = default;
};

struct VmiGpu {
  std::string name;
  std::string deviceName;
  friend bool operator==(const VmiGpu&, const VmiGpu&) = default;
};

struct VirtualMachineInstance {
  std::string ns;
  std::string name;
  std::string uid;
  std::map<std::string, std::string> activePods;  // pod UID -> node, written by KubeVirt
  std::vector<VmiGpu> gpus;
  std::vector<std::string> heldDevices;         // gpu.tally.dev/devices
  std::vector<DeviceTemplate> deviceTemplates;  // gpu.tally.dev/device-templates
  std::string attachToken;                      // gpu.tally.dev/attachment
  std::string phase;
  friend bool operator==(const VirtualMachineInstance&, const VirtualMachineInstance&) = default;
};

struct AddonAssignment {
  std::string addonId;
  std::int64_t quantity = 0;
  friend bool operator==(const AddonAssignment&, const AddonAssignment&) = default;
};

struct HardUsed {
  std::int64_t hard = 0;
  std::int64_t used = 0;
  friend bool operator==(const HardUsed&, const HardUsed&) = default;
};

// Organization status.quotaUsage.accelerators[profile].
struct AcceleratorUsage {
  std::optional<HardUsed> shares;
  std::optional<HardUsed> memoryMiB;
  std::optional<HardUsed> corePercent;
  std::optional<HardUsed> devices;
  friend bool operator==(const AcceleratorUsage&, const AcceleratorUsage&) = default;
};

struct Organization {
  std::string ns;
  std::string name;
  std::vector<AddonAssignment> addons;
  std::map<std::string, AcceleratorUsage> acceleratorStatus;
  friend bool operator==(const Organization&, const Organization&) = default;
};

struct GpuGrant {
  std::int64_t devices = 0;
  std::int64_t shares = 0;
  std::int64_t memoryMiB = 0;
  std::int64_t corePercent = 0;
  friend bool operator==(const GpuGrant&, const GpuGrant&) = default;
};

struct Addon {
  std::string id;
  bool disabled = false;
  bool selfService = true;
  std::map<std::string, GpuGrant> gpu;  // profile id (class name) -> grant
  friend bool operator==(const Addon&, const Addon&) = default;
};

// The add-on catalogue from the billing-plans ConfigMap.
struct BillingPlans {
  std::map<std::string, Addon> addons;
  friend bool operator==(const BillingPlans&, const BillingPlans&) = default;
};

// An operator-only add-on that grants only devices of one profile.
// Returns the profile when the add-on is a reservation add-on.
std::optional<std::string> reservationProfile(const Addon& addon);

// KubeVirt CR permittedHostDevices entry.
struct PermittedHostDevice {
  std::string resourceName;
  std::string selector;  // pciVendorSelector or mdevNameSelector
  bool mediated = false;
  bool externalResourceProvider = false;
  friend bool operator==(const PermittedHostDevice&, const PermittedHostDevice&) = default;
};

// An alert that is firing (from an optional Alertmanager source).
struct ActiveAlert {
  std::string name;
  std::string pool;  // empty: applies to every pool
  friend bool operator==(const ActiveAlert&, const ActiveAlert&) = default;
};

}  // namespace tally::model
