#include "watches.hpp"

#include <atomic>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/codec/ledger_directory.hpp"
#include "tally/common/thread_name.hpp"
#include "tally/model/usage.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/codec.hpp"
#include "tally/runtime/informer.hpp"

namespace tally::extender {

namespace od = simdjson::ondemand;

namespace {

// A decoded object with the identity the informer's store needs (the model's
// types carry no resourceVersion).
template <class Codec>
struct Keyed {
  typename Codec::Object value;
  std::string ns, name, resourceVersion;
};

// Declared for every codec; only the billing-plans ConfigMap, which needs its
// identity before its data, defines and uses it.
template <class Codec>
codec::Result<typename Codec::Object> decodeWatched(std::string_view raw, const Keyed<Codec>& identity);

// The billing-plans informer lists only the ConfigMap --billing-plans names
// (its namespace and a metadata.name selector), and codecs carry no
// configuration: the ConfigMap it delivers is decoded as the catalogue at its
// own location.
template <>
codec::Result<std::optional<model::BillingPlans>> decodeWatched<codec::BillingPlansCodec>(
    std::string_view raw, const Keyed<codec::BillingPlansCodec>& identity) {
  const codec::BillingPlansLocation location{identity.ns, identity.name};
  std::optional<model::BillingPlans> plans;
  codec::Status status = codec::withJsonValue(raw, "", [&](od::value json) -> codec::Status {
    auto decoded = codec::decodeBillingPlansConfigMap(json, nullptr, location);
    if (!decoded) return std::move(decoded).error();
    plans = std::move(decoded).value();
    return {};
  });
  if (!status) return std::move(status).error();
  return plans;
}

// Adapts a codec::*Codec to the runtime's JsonCodec: reads metadata, then hands
// the object's text to the same decoder tallyctl and the controller use.
template <class Codec>
struct WatchCodec {
  using Object = Keyed<Codec>;

  // One pass: the codec reads the object and hands back its metadata. Only the
  // billing-plans ConfigMap needs its identity before its data (see above).
  static runtime::Result<Object> fromJson(od::value json) {
    if constexpr (std::is_same_v<Codec, codec::BillingPlansCodec>) {
      return fromJsonIdentityFirst(json);
    } else {
      codec::ObjectMeta meta;
      auto decoded = Codec::fromJson(json, &meta);  // fills meta: decode first, then take it
      return keyed(std::move(decoded), meta);
    }
  }

  static runtime::Result<Object> fromJsonIdentityFirst(od::value json) {
    Object out;
    od::object object;
    if (auto e = json.get_object().get(object)) return runtime::jsonError(e, std::string(Codec::kKind));
    for (auto entry : object) {
      od::field member;
      if (auto e = std::move(entry).get(member)) return runtime::jsonError(e, std::string(Codec::kKind));
      std::string_view key;
      if (auto e = member.unescaped_key().get(key)) return runtime::jsonError(e, std::string(Codec::kKind));
      if (key != "metadata") continue;
      od::object meta;
      if (auto e = member.value().get_object().get(meta)) return runtime::jsonError(e, "metadata");
      for (auto metaEntry : meta) {
        od::field f;
        if (auto e = std::move(metaEntry).get(f)) return runtime::jsonError(e, "metadata");
        std::string_view k;
        if (auto e = f.unescaped_key().get(k)) return runtime::jsonError(e, "metadata");
        std::string* target = k == "namespace"         ? &out.ns
                              : k == "name"            ? &out.name
                              : k == "resourceVersion" ? &out.resourceVersion
                                                       : nullptr;
        if (!target) continue;
        std::string_view v;
        if (auto e = f.value().get_string().get(v)) return runtime::jsonError(e, "metadata." + std::string(k));
        target->assign(v);
      }
    }
    if (auto e = object.reset().error()) return runtime::jsonError(e, std::string(Codec::kKind));
    std::string_view raw;
    if (auto e = object.raw_json().get(raw)) return runtime::jsonError(e, std::string(Codec::kKind));
    auto decoded = decodeWatched<Codec>(raw, out);
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    out.value = std::move(decoded).value();
    return out;
  }
  // Built-in kinds arrive as protobuf when the server sends it (the watch asks
  // for it first): one decode, straight into the model's value.
  static runtime::Result<Object> fromProtobuf(std::string_view message) requires requires {
    Codec::fromProtobuf(message, nullptr);
  }
  {
    codec::ObjectMeta meta;
    auto decoded = Codec::fromProtobuf(message, &meta);  // fills meta: decode first, then take it
    return keyed(std::move(decoded), meta);
  }
  static runtime::Result<Object> keyed(codec::Result<typename Codec::Object> decoded, codec::ObjectMeta& meta) {
    if (!decoded) return runtime::Error(runtime::ErrorCode::kDecode, decoded.error().describe());
    return Object{std::move(decoded).value(), std::move(meta.ns), std::move(meta.name),
                  std::move(meta.resourceVersion)};
  }
  static std::string key(const Object& o) { return runtime::namespacedKey(o.ns, o.name); }
  static std::string_view resourceVersion(const Object& o) { return o.resourceVersion; }
};

}  // namespace

struct Watches::Source {
  model::Kind kind;
  std::atomic<std::int64_t> alive{0};  // objects handed to the writer (adds minus deletes)
  bool synced = false;
  virtual ~Source() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual bool informerSynced() const = 0;
  virtual std::size_t informerSize() const = 0;
  virtual double stalenessSeconds() const = 0;
};

namespace {

template <class Codec>
class InformerSource final : public Watches::Source {
 public:
  // Kinds whose codec reads protobuf (the built-in ones) are asked for it when
  // `protobuf`: it costs the API server less to encode than JSON, and a server
  // that answers JSON anyway is read as JSON.
  static runtime::InformerOptions withWire(runtime::InformerOptions options, bool protobuf) {
    if constexpr (runtime::ProtobufCodec<WatchCodec<Codec>>) {
      if (protobuf) options.wire = runtime::Wire::kProtobuf;
    }
    return options;
  }

  InformerSource(model::Kind k, std::shared_ptr<runtime::Client> client, runtime::InformerOptions options,
                 CacheWriter& writer, ExtenderMetrics& metrics, bool protobuf)
      : informer_(std::move(client), withWire(std::move(options), protobuf)) {
    kind = k;
    auto& events = metrics.informerEvents.with({std::string(model::toString(k))});
    typename runtime::Store<WatchCodec<Codec>>::Handlers h;
    h.onAdd = [this, &writer, &events](const Keyed<Codec>& o) {
      writer.upsert(o.value);
      events.inc();
      alive.fetch_add(1);
    };
    h.onUpdate = [&writer, &events](const Keyed<Codec>&, const Keyed<Codec>& o) {
      writer.upsert(o.value);
      events.inc();
    };
    h.onDelete = [this, &writer, &events](const Keyed<Codec>& o) {
      writer.remove(kind, o.ns, o.name);
      events.inc();
      alive.fetch_sub(1);
    };
    informer_.addHandlers(std::move(h));
  }
  void start() override { informer_.start(); }
  void stop() override { informer_.stop(); }
  bool informerSynced() const override { return informer_.hasSynced(); }
  std::size_t informerSize() const override { return informer_.snapshot()->size(); }
  double stalenessSeconds() const override {
    auto s = informer_.staleness();
    if (s == std::chrono::milliseconds::max()) return -1;
    return std::chrono::duration<double>(s).count();
  }

 private:
  runtime::Informer<WatchCodec<Codec>> informer_;
};

runtime::InformerOptions optionsFor(runtime::Resource resource, std::string fieldSelector = {}) {
  runtime::InformerOptions o;
  o.resource = std::move(resource);
  o.fieldSelector = std::move(fieldSelector);
  return o;
}

}  // namespace

std::set<model::Kind> Watches::kinds(const WatchOptions& options) {
  std::set<model::Kind> k = {model::Kind::Node,          model::Kind::Pod,
                             model::Kind::Namespace,     model::Kind::HierarchicalResourceQuota,
                             model::Kind::ResourceQuota, model::Kind::DeviceClass,
                             model::Kind::GpuDevice,     model::Kind::VirtualMachineInstance};
  if (options.organizations) k.insert(model::Kind::Organization);
  if (options.billingPlans) k.insert(model::Kind::BillingPlans);
  if (options.kubevirt) k.insert(model::Kind::KubeVirt);
  if (!options.ledgerDir.empty()) k.insert(model::Kind::Ledger);
  return k;
}

namespace {

// status.phase!=<each phase in which the model says a pod uses nothing>.
std::string nonTerminalPodSelector() {
  std::string selector;
  for (model::PodPhase phase : model::kTerminalPodPhases) {
    selector += (selector.empty() ? "" : ",") + std::string("status.phase!=") + std::string(model::toString(phase));
  }
  return selector;
}

}  // namespace

Watches::Watches(std::shared_ptr<runtime::Client> client, CacheWriter& writer, ExtenderMetrics& metrics,
                 WatchOptions options)
    : options_(std::move(options)), writer_(writer), metrics_(metrics) {
  using runtime::Resource;
  auto add = [&]<class Codec>(Codec*, model::Kind kind, runtime::InformerOptions o) {
    sources_.push_back(
        std::make_unique<InformerSource<Codec>>(kind, client, std::move(o), writer, metrics, options_.protobuf));
  };
  add((codec::NodeCodec*)nullptr, model::Kind::Node, optionsFor(Resource::core("nodes")));
  // Terminal pods hold nothing; the selector makes them leave the cache.
  add((codec::PodCodec*)nullptr, model::Kind::Pod, optionsFor(Resource::core("pods"), nonTerminalPodSelector()));
  add((codec::NamespaceCodec*)nullptr, model::Kind::Namespace, optionsFor(Resource::core("namespaces")));
  add((codec::ResourceQuotaCodec*)nullptr, model::Kind::ResourceQuota, optionsFor(Resource::core("resourcequotas")));
  add((codec::HierarchicalResourceQuotaCodec*)nullptr, model::Kind::HierarchicalResourceQuota,
      optionsFor(Resource::of("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas")));
  add((codec::DeviceClassCodec*)nullptr, model::Kind::DeviceClass,
      optionsFor(Resource::of("gpu.tally.dev", "v1alpha1", "gpudeviceclasses")));
  add((codec::GpuDeviceCodec*)nullptr, model::Kind::GpuDevice,
      optionsFor(Resource::of("gpu.tally.dev", "v1alpha1", "gpudevices")));
  add((codec::VirtualMachineInstanceCodec*)nullptr, model::Kind::VirtualMachineInstance,
      optionsFor(Resource::of("kubevirt.io", "v1", "virtualmachineinstances")));
  if (options_.organizations) {
    add((codec::OrganizationCodec*)nullptr, model::Kind::Organization,
        optionsFor(Resource::of("kube-dc.com", "v1", "organizations")));
  }
  if (options_.billingPlans) {
    const codec::BillingPlansLocation& plans = *options_.billingPlans;
    add((codec::BillingPlansCodec*)nullptr, model::Kind::BillingPlans,
        optionsFor(Resource::core("configmaps", plans.ns), "metadata.name=" + plans.name));
  }
  if (options_.kubevirt) {
    add((codec::KubeVirtCodec*)nullptr, model::Kind::KubeVirt,
        optionsFor(Resource::of("kubevirt.io", "v1", "kubevirts")));
  }
}

Watches::~Watches() { stop(); }

void Watches::start() {
  for (auto& s : sources_) s->start();
  poller_ = std::jthread([this](std::stop_token st) { poll(st); });
  nameThread(poller_.native_handle(), "tally-poll");
}

void Watches::stop() {
  if (poller_.joinable()) {
    poller_.request_stop();
    poller_.join();
  }
  for (auto& s : sources_) s->stop();
}

void Watches::poll(std::stop_token stop) {
  auto nextLedger = std::chrono::steady_clock::now();
  while (!stop.stop_requested()) {
    for (auto& s : sources_) {
      std::string kind(model::toString(s->kind));
      // Synced once the informer listed AND its handlers handed every listed
      // object to the writer (handlers run just after the store publishes).
      if (!s->synced && s->informerSynced() && s->alive.load() == static_cast<std::int64_t>(s->informerSize())) {
        s->synced = true;
        writer_.setSynced(s->kind, true);
        logInfo("cache synced", {{"kind", kind}, {"objects", s->informerSize()}});
      }
      metrics_.cacheSynced.with({kind}).set(s->synced ? 1 : 0);
      metrics_.informerStaleness.with({kind}).set(s->stalenessSeconds());
    }
    if (!options_.ledgerDir.empty() && std::chrono::steady_clock::now() >= nextLedger) {
      nextLedger = std::chrono::steady_clock::now() + options_.ledgerInterval;
      auto ledger = codec::loadLedgerDirectory(options_.ledgerDir);
      if (ledger) {
        writer_.upsert(std::move(ledger).value());
        writer_.setSynced(model::Kind::Ledger, true);
      } else {
        logWarning("cannot read the reservation ledger",
                   {{"dir", options_.ledgerDir.string()}, {"error", ledger.error().describe()}});
      }
      metrics_.cacheSynced.with({"Ledger"}).set(ledger ? 1 : 0);
    }
    std::this_thread::sleep_for(options_.pollInterval);
  }
}

}  // namespace tally::extender
