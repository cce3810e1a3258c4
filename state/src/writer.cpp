#include "tally/state/writer.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <typeindex>

#include "tally/common/log.hpp"
#include "tally/common/memory.hpp"
#include "tally/common/thread_name.hpp"
#include "tally/model/usage.hpp"

namespace tally::state {

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

Writer::Writer(Options options) : options_(std::move(options)) {
  std::set<std::type_index> partTypes;
  for (const AnyExtension* e : options_.extensions) {
    if (!partTypes.insert(e->partType()).second) {
      throw std::invalid_argument("two extensions of one writer publish a part of one type");
    }
  }
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  cluster.tenancy = options_.tenancy;
  cluster.gates = options_.gates;
  // A kind no source reads holds nothing, which is known and never stale
  // (model/sources.hpp): the ledger without a ledger flag, Organizations
  // unwatched.
  for (const KindInfo& info : kKinds) {
    if (!options_.watched.contains(info.kind)) {
      synced_.insert(info.kind);
      cluster.markNotConfigured(info.kind);
    }
  }
  // Readers must always find a snapshot, even before the first event.
  publish();
}

Writer::~Writer() { stop(); }

void Writer::enqueue(Event event, bool urgent) {
  bool wake = false;
  {
    std::lock_guard lock(queueMu_);
    // The first event of a batch, or the first urgent one, is the one the
    // writer waits for; the rest find it awake or due anyway.
    wake = (urgent && !urgent_) || (wakeOnAny_ && queue_.empty());
    queue_.push_back(std::move(event));
    urgent_ = urgent_ || urgent;
  }
  if (wake) queueCv_.notify_one();
}

void Writer::upsert(Object object) {
  // The index keeps no pod that can hold no GPU (what a pod requests of an
  // extended resource never changes): such a pod is queued as its removal,
  // and its decoded value freed here rather than carried to the writer.
  if (auto* pod = std::get_if<model::Pod>(&object); pod && !model::mayHoldGpu(*pod)) {
    enqueue(Remove{model::Kind::Pod, std::move(pod->ns), std::move(pod->name)}, false);
    return;
  }
  enqueue(std::move(object), false);
}

void Writer::remove(model::Kind kind, std::string ns, std::string name) {
  enqueue(Remove{kind, std::move(ns), std::move(name)}, false);
}

void Writer::setSynced(model::Kind kind, bool synced) { enqueue(Synced{kind, synced}, false); }

void Writer::post(Task task, bool urgent) { enqueue(std::move(task), urgent); }

void Writer::postObjectsChange(Task task) {
  // Runs on the writer thread, so it may mark the writer's own state.
  enqueue(Task([this, task = std::move(task)](model::UsageIndex& index) {
            task(index);
            baseDirty_ = true;
          }),
          true);
}

void Writer::start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
  nameThread(thread_.native_handle(), "tally-writer");
}

void Writer::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  queueCv_.notify_all();
  thread_.join();
  std::lock_guard lock(writerMu_);
  for (Observer* o : options_.observers) o->stopped();
}

void Writer::flush() {
  std::vector<Event> batch;
  {
    std::lock_guard lock(queueMu_);
    batch.swap(queue_);
    urgent_ = false;
  }
  std::lock_guard lock(writerMu_);
  applyBatch(batch);
  tick(Clock::now());
  publish();
}

std::size_t Writer::queued() const {
  std::lock_guard lock(queueMu_);
  return queue_.size();
}

PublishStats Writer::stats() const {
  PublishStats s;
  {
    std::lock_guard lock(statsMu_);
    s = stats_;
  }
  std::lock_guard lock(queueMu_);
  s.writerWakeups = writerWakeups_;
  return s;
}

Writer::Clock::time_point Writer::nextDeadline() const {
  auto at = Clock::time_point::max();
  for (const AnyExtension* e : options_.extensions) at = std::min(at, e->nextDeadline());
  if (options_.gates == model::GateSource::Evaluated) at = std::min(at, nextGateEvaluation_);
  return at;
}

void Writer::tick(Clock::time_point now) {
  for (AnyExtension* e : options_.extensions) dirty_ = e->tick(index_, now) || dirty_;
  // An evaluated gate can change with nothing applied (a cache ages past its bound).
  if (options_.gates == model::GateSource::Evaluated && now >= nextGateEvaluation_) dirty_ = true;
}

namespace {

// Whether the classes of `cluster` already carry `gates` as the doors read them.
bool carries(const model::Cluster& cluster, const std::map<std::string, model::GateState>& gates) {
  if (cluster.classes.size() != gates.size()) return false;
  for (const auto& [name, gate] : gates) {
    auto it = cluster.classes.find(name);
    if (it == cluster.classes.end()) return false;
    const model::DeviceClass& cls = it->second;
    // A reason whose figures change (a cache's age) alone is no new decision.
    if (cls.gateOpen != gate.open || cls.gateFailureId != gate.failureId) return false;
  }
  return true;
}

}  // namespace

void Writer::run(std::stop_token stop) {
  std::vector<Event> batch;
  while (!stop.stop_requested()) {
    bool urgent = false;
    auto wakeAt = Clock::now() + std::chrono::seconds(1);
    bool dirty = false;
    {
      // Writer state, read under the writer's lock (flush() may apply too).
      std::lock_guard writer(writerMu_);
      dirty = dirty_;
      if (dirty) wakeAt = std::min(wakeAt, lastPublish_ + options_.publishInterval);
      wakeAt = std::min(wakeAt, nextDeadline());
    }
    {
      std::unique_lock lock(queueMu_);
      wakeOnAny_ = !dirty;
      bool waited = false;
      queueCv_.wait_until(lock, stop, wakeAt, [&] {
        writerWakeups_ += waited ? 1 : 0;  // every check after the first follows a wake-up
        waited = true;
        return urgent_ || (!dirty && !queue_.empty());
      });
      batch.swap(queue_);
      urgent = urgent_;
      urgent_ = false;
    }
    if (stop.stop_requested()) break;
    std::lock_guard lock(writerMu_);
    applyBatch(batch);
    batch.clear();
    // An initial list queues the whole cluster at once; the queue (which
    // takes this buffer at the next swap) need not keep room for it.
    if (batch.capacity() > kRetainedBatch) batch = std::vector<Event>();
    auto now = Clock::now();
    tick(now);
    if (dirty_ && (urgent || now - lastPublish_ >= options_.publishInterval)) publish();
  }
}

void Writer::applyBatch(std::vector<Event>& batch) {
  if (batch.empty()) return;
  auto started = Clock::now();
  for (Event& event : batch) {
    std::visit([this](auto& e) { apply(e); }, event);
  }
  dirty_ = true;
  for (Observer* o : options_.observers) o->applied(index_);
  appliedSinceRelease_ += batch.size();
  std::lock_guard lock(statsMu_);
  stats_.eventsApplied += batch.size();
  stats_.lastApply = Clock::now() - started;
}

void Writer::podChanged(const std::string& key, const model::Pod* pod) {
  for (Observer* o : options_.observers) o->podChanged(key, pod);
}

void Writer::apply(Object& object) {
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  // Resyncs and updates of fields the model does not read (node heartbeats,
  // pod conditions) decode to what the cache already holds: nothing to do.
  auto unchanged = [&](const auto& map, const std::string& key, const auto& value) {
    auto it = map.find(key);
    if (it == map.end() || !(it->second == value)) return false;
    std::lock_guard lock(statsMu_);
    ++stats_.skippedUnchanged;
    return true;
  };
  if (auto* p = std::get_if<model::Pod>(&object)) {
    std::string key = model::objectKey(p->ns, p->name);  // one that may hold a GPU (see upsert)
    if (unchanged(cluster.pods, key, *p)) return;
    index_.upsertPod(*p);
    auto live = index_.cluster().pods.find(key);
    podChanged(key, live == index_.cluster().pods.end() ? nullptr : &live->second);
    return;
  }
  bool changed = true;  // false: the upsert held what the cache held
  std::string key;      // for the observers' objectChanged
  std::visit(Overloaded{
                 [&](model::Node& n) {
                   key = n.name;
                   // Node::dra is the slices' (folded by the index), never the Node's.
                   if (auto it = cluster.nodes.find(n.name); it != cluster.nodes.end()) n.dra = it->second.dra;
                   if (unchanged(cluster.nodes, n.name, n)) return void(changed = false);
                   index_.upsertNode(n);
                 },
                 [&](model::Pod&) {},
                 [&](model::Namespace& n) {
                   key = n.name;
                   if (unchanged(cluster.namespaces, n.name, n)) return void(changed = false);
                   index_.upsertNamespace(n);
                 },
                 [&](model::HierarchicalResourceQuota& q) {
                   key = model::objectKey(q.ns, q.name);
                   cluster.hrqs[key] = std::move(q);
                 },
                 [&](model::ResourceQuota& q) {
                   key = model::objectKey(q.ns, q.name);
                   cluster.quotas[key] = std::move(q);
                 },
                 [&](model::DeviceClass& c) {
                   key = c.name;
                   if (unchanged(cluster.classes, c.name, c)) return void(changed = false);
                   index_.upsertClass(c);
                 },
                 [&](model::GpuDevice& d) {
                   key = model::objectKey(d.ns, d.name);
                   if (unchanged(cluster.devices, key, d)) return void(changed = false);
                   index_.upsertDevice(d);
                 },
                 [&](model::VirtualMachineInstance& v) {
                   key = model::objectKey(v.ns, v.name);
                   if (unchanged(cluster.vmis, key, v)) return void(changed = false);
                   index_.upsertVmi(v);
                 },
                 [&](model::Organization& o) {
                   key = model::objectKey(o.ns, o.name);
                   cluster.organizations[key] = std::move(o);
                 },
                 [&](std::optional<model::BillingPlans>& p) {
                   if (p) cluster.plans = std::move(p);
                 },
                 [&](std::vector<model::PermittedHostDevice>& d) { cluster.permittedHostDevices = std::move(d); },
                 [&](model::Ledger& l) { cluster.ledger = std::move(l); },
                 [&](model::ResourceSlice& r) {
                   key = r.name;
                   if (unchanged(cluster.resourceSlices, r.name, r)) return void(changed = false);
                   index_.upsertResourceSlice(r);
                 },
                 [&](model::ResourceClaim& c) {
                   key = model::objectKey(c.ns, c.name);
                   if (unchanged(cluster.resourceClaims, key, c)) return void(changed = false);
                   index_.upsertResourceClaim(c);
                 },
                 [&](model::DeviceTaintRule& t) {
                   key = t.name;
                   if (unchanged(cluster.deviceTaintRules, t.name, t)) return void(changed = false);
                   index_.upsertDeviceTaintRule(t);
                 },
             },
             object);
  // Snapshots keep claims only as sums (like pods): a claim event leaves
  // the copied base alone.
  baseDirty_ = baseDirty_ || (changed && kindOf(object) != model::Kind::ResourceClaim);
  if (changed) {
    for (Observer* o : options_.observers) o->objectChanged(kindOf(object), key);
  }
}

void Writer::apply(Remove& r) {
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  std::string key = model::objectKey(r.ns, r.name);
  if (r.kind != model::Kind::Pod && r.kind != model::Kind::ResourceClaim) baseDirty_ = true;
  switch (r.kind) {
    case model::Kind::Node: index_.removeNode(r.name); break;
    case model::Kind::Pod:
      index_.removePod(r.ns, r.name);
      podChanged(key, nullptr);
      break;
    case model::Kind::Namespace: index_.removeNamespace(r.name); break;
    case model::Kind::HierarchicalResourceQuota: cluster.hrqs.erase(key); break;
    case model::Kind::ResourceQuota: cluster.quotas.erase(key); break;
    case model::Kind::DeviceClass: index_.removeClass(r.name); break;
    case model::Kind::GpuDevice: index_.removeDevice(r.ns, r.name); break;
    case model::Kind::VirtualMachineInstance: index_.removeVmi(r.ns, r.name); break;
    case model::Kind::Organization: cluster.organizations.erase(key); break;
    case model::Kind::BillingPlans: cluster.plans.reset(); break;
    case model::Kind::KubeVirt: cluster.permittedHostDevices.reset(); break;
    case model::Kind::Ledger: cluster.ledger = {}; break;
    case model::Kind::ResourceSlice: index_.removeResourceSlice(r.name); break;
    case model::Kind::ResourceClaim: index_.removeResourceClaim(r.ns, r.name); break;
    case model::Kind::DeviceTaintRule: index_.removeDeviceTaintRule(r.name); break;
  }
  if (r.kind != model::Kind::Pod) {
    const std::string changedKey = r.ns.empty() ? r.name : key;
    for (Observer* o : options_.observers) o->objectChanged(r.kind, changedKey);
  }
}

void Writer::apply(Synced& s) {
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  baseDirty_ = true;
  if (s.synced) {
    synced_.insert(s.kind);
    cluster.caches[s.kind] = {true, options_.clock()};
  } else {
    synced_.erase(s.kind);
    cluster.caches[s.kind].synced = false;
  }
}

void Writer::apply(Task& task) { task(index_); }

void Writer::publish() {
  auto started = Clock::now();
  auto snap = std::make_unique<Snapshot>();
  const model::Cluster& c = index_.cluster();
  snap->usage = index_.snapshot();
  bool copyCluster = baseDirty_ || !base_;
  // The gates the doors apply, computed from the live cluster (whose classes
  // carry what the auditor published, never what a door applied).
  std::optional<std::map<std::string, model::GateState>> gates;
  if (options_.gates == model::GateSource::Evaluated) {
    if (copyCluster || started >= nextGateEvaluation_) {
      model::AuditOptions audit = options_.gateAudit;
      audit.usage = &snap->usage;
      audit.now = options_.clock();
      audit.firstSeen = nullptr;
      gates = model::doorGates(c, model::GateSource::Evaluated, audit);
      nextGateEvaluation_ = started + options_.gateEvaluationInterval;
      if (!copyCluster && carries(*base_, *gates)) gates.reset();
      copyCluster = copyCluster || gates.has_value();
    }
  } else if (copyCluster) {
    gates = model::doorGates(c, model::GateSource::Published);
  }
  if (copyCluster) {
    auto out = std::make_shared<model::Cluster>(c.withoutPods());
    // Claims are churn, like pods: the snapshot has their sums (nodeUsed,
    // budgets, pendingClaimUnits), the live index the claims themselves.
    out->resourceClaims.clear();
    // `now` only dates audits and reports, which readers of the snapshot do
    // not run on it: the copy keeps the time it was taken.
    out->now = options_.clock();
    if (gates) model::applyDoorGates(*out, *gates);
    base_ = std::move(out);
    // Doors that decide on the published copy against the live index (the
    // extender's bind) get pool totals from the running sums, not a walk
    // over every node per decision.
    index_.noteClusterCopy(base_.get());
    baseDirty_ = false;
  }
  snap->base = base_;
  model::UsageIndex::TouchedNodes touched = index_.takeTouchedNodes();
  if (copyCluster || touched.all || !published_) {
    snap->fit = model::FitTable::build(*base_, snap->usage);
  } else {
    snap->fit = model::FitTable::update(published_->fit, *base_, snap->usage, touched.nodes);
  }
  snap->parts_.reserve(options_.extensions.size());
  for (AnyExtension* e : options_.extensions) snap->parts_.push_back({e->partType(), e->publishPart(c)});
  snap->generation = ++generation_;
  for (const KindInfo& info : kKinds) {
    if (!synced_.contains(info.kind)) snap->unsynced.push_back(info.kind);
  }
  snap->assumedPlacements = index_.assumedCount();
  auto built = Clock::now();
  snap->publishedAt = built;
  const std::size_t shared = snap->fit.blocksShared();
  published_ = snap.get();
  cell_.publish(std::move(snap));
  lastPublish_ = built;
  dirty_ = false;
  for (Observer* o : options_.observers) o->published(*published_);
  releaseFreeMemoryIfDue(*published_);
  std::lock_guard lock(statsMu_);
  ++stats_.publishes;
  stats_.lastPublish = built - started;
  stats_.lastCopiedCluster = copyCluster;
  stats_.clusterCopies += copyCluster ? 1 : 0;
  stats_.lastFitBlocksShared = shared;
}

void Writer::releaseFreeMemoryIfDue(const Snapshot& snapshot) {
  // Once the initial lists are in, and after every large run of events since
  // (a relist), and only when the writer caught up: what decoding and
  // queueing them took is freed by then, and glibc would keep that peak.
  const bool due = (!released_ && appliedSinceRelease_ > 0) || appliedSinceRelease_ >= kReleaseAfterEvents;
  if (!due || !snapshot.ready() || queued() != 0) return;
  released_ = true;
  appliedSinceRelease_ = 0;
  const std::size_t before = residentBytes();
  if (releaseFreeMemory()) {
    logDebug("free memory returned to the system",
             {{"residentBeforeMiB", before >> 20}, {"residentAfterMiB", residentBytes() >> 20}});
  }
}

void upsertCluster(Writer& writer, const model::Cluster& c) {
  for (const auto& [k, v] : c.nodes) writer.upsert(v);
  for (const auto& [k, v] : c.classes) writer.upsert(v);
  for (const auto& [k, v] : c.namespaces) writer.upsert(v);
  for (const auto& [k, v] : c.hrqs) writer.upsert(v);
  for (const auto& [k, v] : c.quotas) writer.upsert(v);
  for (const auto& [k, v] : c.devices) writer.upsert(v);
  for (const auto& [k, v] : c.vmis) writer.upsert(v);
  for (const auto& [k, v] : c.organizations) writer.upsert(v);
  for (const auto& [k, v] : c.resourceSlices) writer.upsert(v);
  for (const auto& [k, v] : c.resourceClaims) writer.upsert(v);
  for (const auto& [k, v] : c.deviceTaintRules) writer.upsert(v);
  for (const auto& [k, v] : c.pods) writer.upsert(v);
  if (c.plans) writer.upsert(c.plans);
  if (c.permittedHostDevices) writer.upsert(*c.permittedHostDevices);
}

}  // namespace tally::state
