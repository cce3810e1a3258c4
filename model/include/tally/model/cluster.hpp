#pragma once
// An immutable picture of everything the model reads. Decisions are functions
// of one Cluster (plus their input); nothing here is ever mutated by a rule.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tally/model/gate.hpp"
#include "tally/model/ledger.hpp"
#include "tally/model/objects.hpp"

namespace tally::model {

enum class Kind {
  Node,
  Pod,
  Namespace,
  HierarchicalResourceQuota,
  ResourceQuota,
  DeviceClass,
  GpuDevice,
  VirtualMachineInstance,
  Organization,
  BillingPlans,
  KubeVirt,
  Ledger,
  ResourceSlice,
  ResourceClaim,
  DeviceTaintRule,
};
std::string_view toString(Kind kind);
inline constexpr Kind kAllKinds[] = {
    Kind::Node,          Kind::Pod,           Kind::Namespace,      Kind::HierarchicalResourceQuota,
    Kind::ResourceQuota, Kind::DeviceClass,   Kind::GpuDevice,      Kind::VirtualMachineInstance,
    Kind::Organization,  Kind::BillingPlans,  Kind::KubeVirt,       Kind::Ledger,
    Kind::ResourceSlice, Kind::ResourceClaim, Kind::DeviceTaintRule};

// What a cache knows about itself. An unsynced cache makes every answer that
// depends on it "unknown", which the model refuses closed.
struct CacheState {
  bool synced = false;
  Timestamp lastSynced = 0;  // last time the cache was confirmed current
  // False when no source of the kind is configured (the ledger without
  // --ledger-dir or --ledger-configmap, Organizations not watched): the kind
  // holds nothing, which is known and never stale (SPEC 3.6, unknown vs not
  // configured). A rule that needs the kind says so itself (ledgerState).
  bool configured = true;
  friend bool operator==(const CacheState&, const CacheState&) = default;
};

// GPU use in a namespace no Organization holds (neither it nor an ancestor):
// a quantity no term of any pool's invariant can attribute (seed 000: stop if
// any quantity cannot be attributed). A binary's configuration, carried with
// the cluster so every door and the audit read the same rule
// (--unorganized-gpu-namespaces, --system-namespaces).
enum class UnorganizedGpuPolicy {
  Refuse,  // the doors refuse such an order (NamespaceUnorganized); the audit finds such use
  Allow,   // the operator accepts use outside Organizations: no refusal, no finding
};
std::string_view toString(UnorganizedGpuPolicy policy);
struct TenancyPolicy {
  UnorganizedGpuPolicy unorganized = UnorganizedGpuPolicy::Refuse;
  // The platform's own namespaces, whose GPU use is not a tenant's.
  std::set<std::string, std::less<>> systemNamespaces{"kube-system", "kube-public", "kube-node-lease", "tally-system"};
  friend bool operator==(const TenancyPolicy&, const TenancyPolicy&) = default;
};

// "namespace/name" for namespaced objects.
std::string objectKey(std::string_view ns, std::string_view name);

// Everything in a Cluster but its pods: the objects that change slowly. Kept
// apart so a copy without the pods (the extender's snapshots share one between
// publications and keep pods in their usage index) takes every field there is.
struct ClusterObjects {
  Timestamp now = 0;
  std::map<std::string, Node> nodes;                      // by name
  std::map<std::string, DeviceClass> classes;             // by name
  std::map<std::string, Namespace> namespaces;            // by name
  std::map<std::string, HierarchicalResourceQuota> hrqs;  // by ns/name
  std::map<std::string, ResourceQuota> quotas;            // by ns/name
  std::map<std::string, GpuDevice> devices;               // by ns/name
  std::map<std::string, VirtualMachineInstance> vmis;     // by ns/name
  std::map<std::string, Organization> organizations;      // by ns/name
  // Dynamic Resource Allocation (model/dra.hpp). The slices are folded into
  // their nodes' Node::dra (foldDraInventory) wherever they change.
  std::map<std::string, ResourceSlice> resourceSlices;      // by name
  std::map<std::string, ResourceClaim> resourceClaims;      // by ns/name
  std::map<std::string, DeviceTaintRule> deviceTaintRules;  // by name
  std::optional<BillingPlans> plans;
  std::optional<std::vector<PermittedHostDevice>> permittedHostDevices;  // KubeVirt CR
  Ledger ledger;
  std::vector<ActiveAlert> alerts;
  std::map<Kind, CacheState> caches;  // missing kind: not synced
  TenancyPolicy tenancy;
  // Where this binary's doors take the gate from (its auditor's publication
  // or their own evaluation): read by the rules that look at a gate on the
  // live cluster rather than a snapshot's (add-on grants).
  GateSource gates = GateSource::Published;
};

struct Cluster : ClusterObjects {
  std::map<std::string, Pod> pods;  // by ns/name

  // A copy with every object but the pods.
  Cluster withoutPods() const {
    Cluster out;
    static_cast<ClusterObjects&>(out) = *this;
    return out;
  }
  // Marks every kind synced at `now` (offline snapshots are complete by construction).
  void markAllSynced();
  // Records that no source of `kind` is configured (see CacheState::configured):
  // what the writer does for each kind it does not read, and tallyctl for a
  // ledger flag it was not given.
  void markNotConfigured(Kind kind);
  bool synced(Kind kind) const;
  bool configured(Kind kind) const;
};

}  // namespace tally::model
