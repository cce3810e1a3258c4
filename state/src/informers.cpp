#include "tally/state/informers.hpp"

#include <atomic>
#include <mutex>
#include <string>

#include "tally/codec/json_text.hpp"
#include "tally/codec/ledger_configmap.hpp"
#include "tally/codec/ledger_directory.hpp"
#include "tally/common/thread_name.hpp"
#include "tally/model/usage.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/codec.hpp"
#include "tally/runtime/informer.hpp"
#include "tally/state/watch_codec.hpp"

namespace tally::state {

struct Informers::Source {
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

// The series of `kind` in `family`, or none.
template <class Metric>
Metric* seriesOf(observability::Family<Metric>* family, model::Kind kind) {
  return family ? &family->with({std::string(model::toString(kind))}) : nullptr;
}

template <class Codec>
class InformerSource final : public Informers::Source {
  static_assert(!runtime::Store<WatchCodec<Codec>>::kKeepsObjects, "the writer holds the values, not the informer");

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
                 Writer& writer, observability::Counter* events, bool protobuf)
      : informer_(std::move(client), withWire(std::move(options), protobuf)) {
    kind = k;
    auto count = [events] {
      if (events) events->inc();
    };
    typename runtime::Store<WatchCodec<Codec>>::Handlers h;
    // The store hands each decoded object over: its value moves to the writer.
    h.onAdd = [this, &writer, count](Keyed<Codec>&& o) {
      writer.upsert(std::move(o.value));
      count();
      alive.fetch_add(1);
    };
    h.onUpdate = [&writer, count](const Identity&, Keyed<Codec>&& o) {
      writer.upsert(std::move(o.value));
      count();
    };
    h.onDelete = [this, &writer, count](const Identity& o) {
      writer.remove(kind, o.ns, o.name);
      count();
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

// What the informer of `kind` lists and watches under these options (listScope).
runtime::InformerOptions informerOptions(model::Kind kind, const SourceOptions& options) {
  ListScope scope = listScope(kind, options);
  runtime::InformerOptions o;
  o.resource = std::move(scope.resource);
  o.labelSelector = std::move(scope.labelSelector);
  o.fieldSelector = std::move(scope.fieldSelector);
  o.pageSize = scope.pageSize;
  return o;
}

}  // namespace

// The reservation ledger's source, whichever it is: hands each revision read
// whole to the writer with its history (checked against every record seen
// before it in this process), and on a failed read keeps the last revision,
// marked with the error. Before any revision was read the ledger stays not
// synced (the audit's StaleCapacity).
class Informers::LedgerSource {
 public:
  LedgerSource(std::shared_ptr<runtime::Client> client, Writer& writer, const SourceOptions& options,
               observability::Gauge* synced)
      : writer_(writer), dir_(options.ledgerDir), synced_(synced) {
    if (!options.ledgerConfigMap) return;
    configMap_ = *options.ledgerConfigMap;
    informer_.emplace(std::move(client), informerOptions(model::Kind::Ledger, options));
    typename runtime::Store<Watch>::Handlers h;
    h.onAdd = [this](Keyed<codec::LedgerConfigMapCodec>&& cm) { revision(std::move(cm.value)); };
    h.onUpdate = [this](const Identity&, Keyed<codec::LedgerConfigMapCodec>&& cm) { revision(std::move(cm.value)); };
    h.onDelete = [this](const Identity&) {
      absentReported_ = true;  // the deletion says it: the poller need not add "does not exist"
      failed("configmap/" + configMap_.describe(), "the ledger ConfigMap was deleted");
    };
    informer_->addHandlers(std::move(h));
  }

  void start() {
    if (informer_) informer_->start();
  }
  void stop() {
    if (informer_) informer_->stop();
  }

  // On the poller: the directory, when its signature changed (or the last
  // read failed); the ConfigMap's absence once its informer listed. A source
  // found unchanged and readable confirms the ledger current (the audit's
  // StaleCapacity reads when it was last confirmed), so a quiet ledger is
  // never stale and one that cannot be read becomes stale.
  void poll() {
    if (informer_) {
      if (informer_->hasSynced() && informer_->snapshot()->size() == 0 && !absentReported_) {
        absentReported_ = true;
        failed("configmap/" + configMap_.describe(), "the ledger ConfigMap does not exist");
      }
      const auto heard = informer_->staleness();
      if (informer_->hasSynced() && informer_->snapshot()->size() > 0 && heard < kConfigMapHeardWithin) confirm();
      return;
    }
    auto signature = codec::ledgerDirectorySignature(dir_);
    if (signature && *signature == signature_) {
      confirm();
      return;  // nothing changed since the last revision read whole
    }
    signature_.clear();  // until a read succeeds, every poll reads again
    if (!signature) {
      failed(dir_.string(), signature.error().describe());
      return;
    }
    auto read = codec::readLedgerDirectory(dir_);
    if (!read) {
      failed(dir_.string(), read.error().describe());
      return;
    }
    signature_ = std::move(read->signature);
    revision(std::move(read->ledger));
  }

 private:
  using Watch = WatchCodec<codec::LedgerConfigMapCodec>;
  static constexpr auto kConfirmEvery = std::chrono::seconds(5);
  static constexpr std::chrono::milliseconds kConfigMapHeardWithin{120'000};

  void revision(model::Ledger ledger) {
    std::lock_guard lock(mu_);
    absentReported_ = false;
    lastError_.reset();
    auto step = model::advanceLedgerHistory(memory_, std::move(ledger));
    memory_ = std::move(step.memory);
    for (const auto& p : step.ledger.history) {
      logWarning("reservation ledger history", {{"record", p.id},
                                                {"source", p.source},
                                                {"rule", std::string(model::toString(p.rule))},
                                                {"problem", p.message}});
    }
    lastGood_ = step.ledger;
    writer_.upsert(std::move(step.ledger));
    writer_.setSynced(model::Kind::Ledger, true);
    if (synced_) synced_->set(1);
  }

  // The ledger is current as last read, at most every kConfirmEvery (each
  // confirmation makes the writer copy the cluster).
  void confirm() {
    {
      std::lock_guard lock(mu_);
      if (!lastGood_ || lastError_) return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - lastConfirmed_ < kConfirmEvery) return;
    lastConfirmed_ = now;
    writer_.setSynced(model::Kind::Ledger, true);
  }

  void failed(const std::string& source, const std::string& message) {
    std::lock_guard lock(mu_);
    if (synced_) synced_->set(0);
    if (lastError_ == model::LedgerReadError{source, message}) return;  // reported already
    lastError_ = model::LedgerReadError{source, message};
    logWarning("cannot read the reservation ledger; keeping the last revision read whole",
               {{"source", source}, {"error", message}, {"kept", lastGood_.has_value()}});
    if (!lastGood_) return;  // nothing read yet: the ledger stays unknown
    model::Ledger kept = *lastGood_;
    kept.readError = lastError_;
    writer_.upsert(std::move(kept));
  }

  Writer& writer_;
  std::filesystem::path dir_;
  codec::BillingPlansLocation configMap_;
  observability::Gauge* synced_;
  std::optional<runtime::Informer<Watch>> informer_;
  std::string signature_;                                  // of the directory's last revision read whole (poller only)
  std::chrono::steady_clock::time_point lastConfirmed_{};  // poller only
  std::atomic<bool> absentReported_{false};
  std::mutex mu_;
  model::LedgerMemory memory_;
  std::optional<model::Ledger> lastGood_;
  std::optional<model::LedgerReadError> lastError_;
};

struct Informers::Metrics {
  explicit Metrics(observability::Registry& r)
      : events(r.counter(std::string(kInformerEventsMetric), "Watch events handed to the state writer, by kind.",
                         {"kind"})),
        staleness(r.gauge(std::string(kInformerStalenessMetric),
                          "Seconds since the kind's watch was last heard (-1: not yet).", {"kind"})),
        synced(r.gauge(std::string(kCacheSyncedMetric), "1 when the kind's cache has synced.", {"kind"})) {}
  observability::Family<observability::Counter>& events;
  observability::Family<observability::Gauge>& staleness;
  observability::Family<observability::Gauge>& synced;
};

Informers::Informers(std::shared_ptr<runtime::Client> client, Writer& writer, SourceOptions options,
                     observability::Registry* metrics)
    : options_(std::move(options)), writer_(writer), metrics_(metrics ? std::make_unique<Metrics>(*metrics) : nullptr) {
  auto* events = metrics_ ? &metrics_->events : nullptr;
  auto* synced = metrics_ ? &metrics_->synced : nullptr;
  if (enabled(kindInfo(model::Kind::Ledger), options_)) {
    ledger_ = std::make_unique<LedgerSource>(client, writer, options_, seriesOf(synced, model::Kind::Ledger));
  }
  forEachKind([&](auto k) {
    constexpr model::Kind kind = decltype(k)::value;
    using Codec = typename KindCodec<kind>::type;
    const KindInfo& info = kindInfo(kind);
    if constexpr (!std::is_void_v<Codec>) {
      static_assert(kindInfo(kind).protobuf == runtime::ProtobufCodec<WatchCodec<Codec>>,
                    "the registry's protobuf column says which codecs read protobuf");
      if (!enabled(info, options_)) return;
      sources_.push_back(std::make_unique<InformerSource<Codec>>(kind, client, informerOptions(kind, options_), writer,
                                                                 seriesOf(events, kind),
                                                                 options_.protobuf && info.protobuf));
    }
  });
}

Informers::~Informers() { stop(); }

void Informers::start() {
  for (auto& s : sources_) s->start();
  if (ledger_) ledger_->start();
  poller_ = std::jthread([this](std::stop_token st) { poll(st); });
  nameThread(poller_.native_handle(), "tally-poll");
}

void Informers::stop() {
  if (poller_.joinable()) {
    poller_.request_stop();
    poller_.join();
  }
  for (auto& s : sources_) s->stop();
  if (ledger_) ledger_->stop();
}

void Informers::poll(std::stop_token stop) {
  auto nextLedger = std::chrono::steady_clock::now();
  // A synced cache whose watch was heard lately is confirmed current again this
  // often (the audit's StaleCapacity reads when a cache was last confirmed).
  constexpr auto kConfirmEvery = std::chrono::seconds(15);
  constexpr double kHeardWithinSeconds = 120;
  auto nextConfirm = std::chrono::steady_clock::now() + kConfirmEvery;
  while (!stop.stop_requested()) {
    const bool confirm = std::chrono::steady_clock::now() >= nextConfirm;
    if (confirm) nextConfirm = std::chrono::steady_clock::now() + kConfirmEvery;
    for (auto& s : sources_) {
      if (confirm && s->synced && s->informerSynced()) {
        const double heard = s->stalenessSeconds();
        if (heard >= 0 && heard < kHeardWithinSeconds) writer_.setSynced(s->kind, true);
      }
      // Synced once the informer listed AND its handlers handed every listed
      // object to the writer (handlers run just after the store publishes).
      if (!s->synced && s->informerSynced() && s->alive.load() == static_cast<std::int64_t>(s->informerSize())) {
        s->synced = true;
        writer_.setSynced(s->kind, true);
        logInfo("cache synced", {{"kind", std::string(model::toString(s->kind))}, {"objects", s->informerSize()}});
      }
      if (metrics_) {
        seriesOf(&metrics_->synced, s->kind)->set(s->synced ? 1 : 0);
        seriesOf(&metrics_->staleness, s->kind)->set(s->stalenessSeconds());
      }
    }
    if (ledger_ && std::chrono::steady_clock::now() >= nextLedger) {
      nextLedger = std::chrono::steady_clock::now() + options_.ledgerInterval;
      ledger_->poll();
    }
    std::this_thread::sleep_for(options_.pollInterval);
  }
}

}  // namespace tally::state
