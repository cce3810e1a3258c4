#pragma once
// The one registry of the kinds Tally reads: for each model::Kind, where it
// is served (group, version, resource), whether it is a built-in kind watched
// as protobuf, which option turns its watch on, the codec that decodes it and
// the model value it decodes to. The informers, the writer's event type, the
// not-synced list and the metrics' kind labels all read this table.

#include <array>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "tally/codec/codecs.hpp"
#include "tally/codec/objects.hpp"
#include "tally/model/cluster.hpp"
#include "tally/runtime/resource.hpp"

namespace tally::state {

// What turns a kind's source on (see SourceOptions).
enum class Gate { Always, Organizations, BillingPlans, KubeVirt, Ledger, Dra };

struct KindInfo {
  model::Kind kind;
  std::string_view group;     // "" for the core API
  std::string_view version;   // "" when not served by the API server (the ledger)
  std::string_view resource;  // plural; "" when not served by the API server
  bool protobuf;              // a built-in kind whose codec reads Kubernetes' protobuf
  Gate gate;
};

// In model::Kind order (checked below).
inline constexpr std::array<KindInfo, 15> kKinds{{
    {model::Kind::Node, "", "v1", "nodes", true, Gate::Always},
    {model::Kind::Pod, "", "v1", "pods", true, Gate::Always},
    {model::Kind::Namespace, "", "v1", "namespaces", true, Gate::Always},
    {model::Kind::HierarchicalResourceQuota, "hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas", false,
     Gate::Always},
    {model::Kind::ResourceQuota, "", "v1", "resourcequotas", true, Gate::Always},
    {model::Kind::DeviceClass, "gpu.tally.dev", "v1alpha1", "gpudeviceclasses", false, Gate::Always},
    {model::Kind::GpuDevice, "gpu.tally.dev", "v1alpha1", "gpudevices", false, Gate::Always},
    {model::Kind::VirtualMachineInstance, "kubevirt.io", "v1", "virtualmachineinstances", false, Gate::Always},
    {model::Kind::Organization, "kube-dc.com", "v1", "organizations", false, Gate::Organizations},
    // One ConfigMap (--billing-plans names it); read as JSON: its codec reads the catalogue's text.
    {model::Kind::BillingPlans, "", "v1", "configmaps", false, Gate::BillingPlans},
    {model::Kind::KubeVirt, "kubevirt.io", "v1", "kubevirts", false, Gate::KubeVirt},
    // The reservation records: a directory, polled, or one ConfigMap, watched
    // (neither is one API resource of its own: the ledger source reads them).
    {model::Kind::Ledger, "", "", "", false, Gate::Ledger},
    // Dynamic Resource Allocation (resource.k8s.io/v1), read as JSON.
    {model::Kind::ResourceSlice, "resource.k8s.io", "v1", "resourceslices", false, Gate::Dra},
    {model::Kind::ResourceClaim, "resource.k8s.io", "v1", "resourceclaims", false, Gate::Dra},
    {model::Kind::DeviceTaintRule, "resource.k8s.io", "v1", "devicetaintrules", false, Gate::Dra},
}};

constexpr const KindInfo& kindInfo(model::Kind kind) { return kKinds[static_cast<std::size_t>(kind)]; }

constexpr bool registryInKindOrder() {
  if (kKinds.size() != std::size(model::kAllKinds)) return false;
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    if (kKinds[i].kind != model::kAllKinds[i] || static_cast<std::size_t>(kKinds[i].kind) != i) return false;
  }
  return true;
}
static_assert(registryInKindOrder(), "state::kKinds lists every model::Kind once, in enum order");

// The codec of each kind the API server serves (the ledger has none: it is
// read from files by codec::loadLedgerDirectory).
template <model::Kind K>
struct KindCodec {
  using type = void;
};
#define TALLY_STATE_KIND_CODEC(K, Codec) \
  template <>                            \
  struct KindCodec<model::Kind::K> {     \
    using type = codec::Codec;           \
  };
TALLY_STATE_KIND_CODEC(Node, NodeCodec)
TALLY_STATE_KIND_CODEC(Pod, PodCodec)
TALLY_STATE_KIND_CODEC(Namespace, NamespaceCodec)
TALLY_STATE_KIND_CODEC(HierarchicalResourceQuota, HierarchicalResourceQuotaCodec)
TALLY_STATE_KIND_CODEC(ResourceQuota, ResourceQuotaCodec)
TALLY_STATE_KIND_CODEC(DeviceClass, DeviceClassCodec)
TALLY_STATE_KIND_CODEC(GpuDevice, GpuDeviceCodec)
TALLY_STATE_KIND_CODEC(VirtualMachineInstance, VirtualMachineInstanceCodec)
TALLY_STATE_KIND_CODEC(Organization, OrganizationCodec)
TALLY_STATE_KIND_CODEC(BillingPlans, BillingPlansCodec)
TALLY_STATE_KIND_CODEC(KubeVirt, KubeVirtCodec)
TALLY_STATE_KIND_CODEC(ResourceSlice, ResourceSliceCodec)
TALLY_STATE_KIND_CODEC(ResourceClaim, ResourceClaimCodec)
TALLY_STATE_KIND_CODEC(DeviceTaintRule, DeviceTaintRuleCodec)
#undef TALLY_STATE_KIND_CODEC

// One decoded object of any kind: alternative i is the value of kKinds[i].
using Object =
    std::variant<model::Node, model::Pod, model::Namespace, model::HierarchicalResourceQuota, model::ResourceQuota,
                 model::DeviceClass, model::GpuDevice, model::VirtualMachineInstance, model::Organization,
                 std::optional<model::BillingPlans>, std::vector<model::PermittedHostDevice>, model::Ledger,
                 model::ResourceSlice, model::ResourceClaim, model::DeviceTaintRule>;
static_assert(std::variant_size_v<Object> == kKinds.size());

template <model::Kind K>
using ValueOf = std::variant_alternative_t<static_cast<std::size_t>(K), Object>;

namespace detail {
template <model::Kind K>
constexpr bool codecMatchesValue() {
  using Codec = typename KindCodec<K>::type;
  if constexpr (std::is_void_v<Codec>) {
    return true;
  } else {
    return std::is_same_v<typename Codec::Object, ValueOf<K>>;
  }
}
template <std::size_t... I>
constexpr bool codecsMatchValues(std::index_sequence<I...>) {
  return (codecMatchesValue<static_cast<model::Kind>(I)>() && ...);
}
}  // namespace detail
static_assert(detail::codecsMatchValues(std::make_index_sequence<kKinds.size()>()),
              "each kind's codec decodes to its Object alternative");

constexpr model::Kind kindOf(const Object& object) { return static_cast<model::Kind>(object.index()); }

// f(std::integral_constant<model::Kind, K>) for every kind, in order.
template <class F>
constexpr void forEachKind(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<model::Kind, static_cast<model::Kind>(I)>{}), ...);
  }
  (std::make_index_sequence<kKinds.size()>());
}

// Which sources run, and how they are read.
struct SourceOptions {
  // The ConfigMap of the add-on catalogue; empty: none is watched.
  std::optional<codec::BillingPlansLocation> billingPlans = codec::BillingPlansLocation{};
  bool organizations = true;
  bool kubevirt = false;
  // Watch ResourceSlices, ResourceClaims and DeviceTaintRules (DRA pools).
  bool dra = true;
  // The ledger's source: a directory (a git-sync checkout) polled every
  // ledgerInterval, or one ConfigMap (each data key a record) watched. At most
  // one of the two; neither: no ledger (no reservation holds).
  std::filesystem::path ledgerDir;
  std::optional<codec::BillingPlansLocation> ledgerConfigMap;  // namespace/name
  std::chrono::milliseconds ledgerInterval{30'000};
  std::chrono::milliseconds pollInterval{100};
  // Ask for the built-in kinds (KindInfo::protobuf) as protobuf; CRDs are always JSON.
  bool protobuf = true;
};

bool enabled(const KindInfo& info, const SourceOptions& options);
// The kinds these options read (the writer waits for each to sync).
std::set<model::Kind> watchedKinds(const SourceOptions& options);

// Where `kind` is served, in every namespace (Resource::inNamespace narrows
// it); the ledger, which is no resource of its own, has an empty one.
runtime::Resource resourceOf(model::Kind kind);

// What the informer of `kind` lists and watches under these options, and so
// what tallyctl lists live: the resource (the catalogue's and the ledger
// ConfigMap's in their namespace), the selectors (terminal pods are left out,
// they hold nothing; the catalogue and the ledger are one named ConfigMap
// each) and the page size. The ledger has a scope only with ledgerConfigMap.
struct ListScope {
  runtime::Resource resource;
  std::string labelSelector;
  std::string fieldSelector;
  std::int64_t pageSize = 500;
};
ListScope listScope(model::Kind kind, const SourceOptions& options);

}  // namespace tally::state
