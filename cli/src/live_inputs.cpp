#include "live_inputs.hpp"

#include <type_traits>

#include "tally/codec/json_text.hpp"
#include "tally/codec/ledger_configmap.hpp"
#include "tally/model/dra.hpp"
#include "tally/model/usage.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/config.hpp"
#include "tally/state/kinds.hpp"

namespace tally::cli {
namespace {

namespace od = simdjson::ondemand;

codec::DecodeError liveError(std::string item, std::string message) {
  codec::DecodeError error;
  error.item = std::move(item);
  error.message = std::move(message);
  return error;
}

// The map of the cluster a decoded value goes to, and its key there.
template <class T>
std::map<std::string, T>& mapOf(model::Cluster& c);
template <>
std::map<std::string, model::Node>& mapOf(model::Cluster& c) {
  return c.nodes;
}
template <>
std::map<std::string, model::Pod>& mapOf(model::Cluster& c) {
  return c.pods;
}
template <>
std::map<std::string, model::Namespace>& mapOf(model::Cluster& c) {
  return c.namespaces;
}
template <>
std::map<std::string, model::HierarchicalResourceQuota>& mapOf(model::Cluster& c) {
  return c.hrqs;
}
template <>
std::map<std::string, model::ResourceQuota>& mapOf(model::Cluster& c) {
  return c.quotas;
}
template <>
std::map<std::string, model::DeviceClass>& mapOf(model::Cluster& c) {
  return c.classes;
}
template <>
std::map<std::string, model::GpuDevice>& mapOf(model::Cluster& c) {
  return c.devices;
}
template <>
std::map<std::string, model::VirtualMachineInstance>& mapOf(model::Cluster& c) {
  return c.vmis;
}
template <>
std::map<std::string, model::Organization>& mapOf(model::Cluster& c) {
  return c.organizations;
}
template <>
std::map<std::string, model::ResourceSlice>& mapOf(model::Cluster& c) {
  return c.resourceSlices;
}
template <>
std::map<std::string, model::ResourceClaim>& mapOf(model::Cluster& c) {
  return c.resourceClaims;
}
template <>
std::map<std::string, model::DeviceTaintRule>& mapOf(model::Cluster& c) {
  return c.deviceTaintRules;
}

template <class T>
std::string keyOf(const T& object) {
  if constexpr (requires { object.ns; }) {
    return model::objectKey(object.ns, object.name);
  } else {
    return object.name;
  }
}

// One decoded item into the cluster.
template <model::Kind K>
codec::Status addItem(codec::Snapshot& snapshot, od::value item, const codec::BillingPlansLocation& plans) {
  using Codec = typename state::KindCodec<K>::type;
  model::Cluster& cluster = snapshot.cluster;
  if constexpr (K == model::Kind::BillingPlans) {
    auto decoded = codec::decodeBillingPlansConfigMap(item, nullptr, plans);
    if (!decoded) return std::move(decoded).error();
    if (decoded->has_value()) cluster.plans = std::move(decoded->value());
  } else if constexpr (K == model::Kind::KubeVirt) {
    auto decoded = Codec::fromJson(item, nullptr);
    if (!decoded) return std::move(decoded).error();
    auto& permitted = cluster.permittedHostDevices;
    if (!permitted) permitted.emplace();
    permitted->insert(permitted->end(), decoded->begin(), decoded->end());
  } else {
    auto decoded = Codec::fromJson(item, nullptr);
    if (!decoded) return std::move(decoded).error();
    std::string key = keyOf(*decoded);
    mapOf<typename Codec::Object>(cluster)[key] = std::move(decoded).value();
  }
  ++snapshot.decoded[std::string(Codec::kKind)];
  return {};
}

// One page of a List: its items into the cluster, the continue token out.
template <model::Kind K>
codec::Status addPage(codec::Snapshot& snapshot, std::string_view body, const codec::BillingPlansLocation& plans,
                      std::string& next) {
  next.clear();
  return codec::withJsonValue(body, "", [&](od::value root) -> codec::Status {
    od::object list;
    if (root.get_object().get(list)) return liveError("list", "not a JSON object");
    for (auto entry : list) {
      od::field member;
      if (std::move(entry).get(member)) return liveError("list", "malformed member");
      std::string_view name;
      if (member.unescaped_key().get(name)) return liveError("list", "malformed member name");
      if (name == "metadata") {
        od::object meta;
        if (member.value().get_object().get(meta)) return liveError("list", "metadata is not an object");
        std::string_view token;
        if (meta.find_field_unordered("continue").get_string().get(token) == simdjson::SUCCESS) next = token;
      } else if (name == "items") {
        od::array items;
        if (member.value().get_array().get(items)) continue;  // null: an empty list
        std::size_t index = 0;
        for (auto element : items) {
          od::value item;
          if (std::move(element).get(item)) return liveError("items[" + std::to_string(index) + "]", "not an object");
          auto added = addItem<K>(snapshot, item, plans);
          if (!added) return std::move(added).error().within("items[" + std::to_string(index) + "]");
          ++index;
        }
      }
    }
    return {};
  });
}

}  // namespace

codec::Result<codec::Snapshot> listLive(const LiveOptions& options) {
  auto plans = codec::parseBillingPlansLocation(options.billingPlans);
  if (!plans) return liveError("--billing-plans", plans.error().message);
  if (options.kubeconfig.empty()) return liveError("--kubeconfig", "no kubeconfig given and $KUBECONFIG is not set");
  auto config = runtime::loadKubeconfig(options.kubeconfig, options.context);
  if (!config) return liveError("kubeconfig " + options.kubeconfig, config.error().describe());
  config->userAgent = "tallyctl";
  // A command, not a daemon: a few quick retries, then the error.
  auto client =
      runtime::Client::create(std::move(config).value(),
                              runtime::RetryPolicy{3, std::chrono::milliseconds(200), std::chrono::milliseconds(1000)});
  if (!client) return liveError("kubeconfig " + options.kubeconfig, client.error().describe());

  state::SourceOptions sources;
  sources.billingPlans = *plans;
  sources.organizations = options.organizations;
  sources.kubevirt = options.kubevirt;
  sources.dra = options.dra;
  sources.ledgerConfigMap = options.ledgerConfigMap;

  codec::Snapshot snapshot;
  codec::Status status;
  state::forEachKind([&](auto k) {
    constexpr model::Kind kind = decltype(k)::value;
    using Codec = typename state::KindCodec<kind>::type;
    if constexpr (!std::is_void_v<Codec>) {
      const state::KindInfo& info = state::kindInfo(kind);
      if (!status || !state::enabled(info, sources)) return;
      // Exactly what the informers of the binaries list and watch.
      const state::ListScope scope = state::listScope(kind, sources);
      const runtime::Resource& resource = scope.resource;
      runtime::ListOptions list;
      list.labelSelector = scope.labelSelector;
      list.fieldSelector = scope.fieldSelector;
      list.limit = scope.pageSize;
      do {
        auto page = (*client)->list(resource, list, runtime::Wire::kJson);
        if (!page) {
          status = liveError("list " + resource.describe(), page.error().describe());
          return;
        }
        std::string next;
        auto added = addPage<kind>(snapshot, page->body, *plans, next);
        if (!added) {
          status = std::move(added).error().within("list " + resource.describe());
          return;
        }
        list.continueToken = std::move(next);
      } while (!list.continueToken.empty());
    }
  });
  if (!status) return std::move(status).error();
  if (options.ledgerConfigMap) {
    const codec::BillingPlansLocation& at = *options.ledgerConfigMap;
    auto body = (*client)->get(state::listScope(model::Kind::Ledger, sources).resource, at.name);
    if (!body) return liveError("--ledger-configmap " + at.describe(), body.error().describe());
    auto ledger = codec::decodeLedgerConfigMapText(*body);
    if (!ledger) return std::move(ledger).error().within("ledger configmap " + at.describe());
    snapshot.cluster.ledger = std::move(ledger).value();
  }
  model::foldDraInventory(snapshot.cluster);
  return snapshot;
}

}  // namespace tally::cli
