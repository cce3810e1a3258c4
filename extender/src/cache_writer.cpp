#include "tally/extender/cache_writer.hpp"

#include <algorithm>

#include "tally/common/thread_name.hpp"
#include "tally/model/admission.hpp"
#include "tally/model/usage.hpp"

namespace tally::extender {

namespace {

using Clock = std::chrono::steady_clock;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

model::Kind kindOf(const WatchedObject& object) {
  return std::visit(Overloaded{
                        [](const model::Node&) { return model::Kind::Node; },
                        [](const model::Pod&) { return model::Kind::Pod; },
                        [](const model::Namespace&) { return model::Kind::Namespace; },
                        [](const model::HierarchicalResourceQuota&) { return model::Kind::HierarchicalResourceQuota; },
                        [](const model::ResourceQuota&) { return model::Kind::ResourceQuota; },
                        [](const model::DeviceClass&) { return model::Kind::DeviceClass; },
                        [](const model::GpuDevice&) { return model::Kind::GpuDevice; },
                        [](const model::VirtualMachineInstance&) { return model::Kind::VirtualMachineInstance; },
                        [](const model::Organization&) { return model::Kind::Organization; },
                        [](const std::optional<model::BillingPlans>&) { return model::Kind::BillingPlans; },
                        [](const std::vector<model::PermittedHostDevice>&) { return model::Kind::KubeVirt; },
                        [](const model::Ledger&) { return model::Kind::Ledger; },
                    },
                    object);
}

CacheWriter::CacheWriter(Options options) : options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  for (model::Kind kind : model::kAllKinds) {
    if (!options_.watched.contains(kind)) {
      synced_.insert(kind);
      cluster.caches[kind] = {true, options_.clock()};
    }
  }
  // Readers must always find a snapshot, even before the first event.
  publish();
}

CacheWriter::~CacheWriter() { stop(); }

void CacheWriter::enqueue(Event event, bool urgent) {
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

void CacheWriter::upsert(WatchedObject object) { enqueue(std::move(object), false); }

void CacheWriter::remove(model::Kind kind, std::string ns, std::string name) {
  enqueue(Remove{kind, std::move(ns), std::move(name)}, false);
}

void CacheWriter::setSynced(model::Kind kind, bool synced) { enqueue(Synced{kind, synced}, false); }

std::future<AssumeOutcome> CacheWriter::assume(std::string ns, std::string name, std::string uid, std::string node) {
  auto done = std::make_shared<std::promise<AssumeOutcome>>();
  auto future = done->get_future();
  enqueue(Assume{std::move(ns), std::move(name), std::move(uid), std::move(node), std::move(done)}, true);
  return future;
}

void CacheWriter::forget(std::string uid) { enqueue(Forget{std::move(uid)}, true); }

void CacheWriter::start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
  nameThread(thread_.native_handle(), "tally-writer");
}

void CacheWriter::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  queueCv_.notify_all();
  thread_.join();
  std::lock_guard lock(writerMu_);
  for (auto& p : waitingForPublish_) p->set_value(AssumeOutcome::NotPublished);
  waitingForPublish_.clear();
}

void CacheWriter::flush() {
  std::vector<Event> batch;
  {
    std::lock_guard lock(queueMu_);
    batch.swap(queue_);
    urgent_ = false;
  }
  std::lock_guard lock(writerMu_);
  applyBatch(batch);
  expireAssumptions(Clock::now());
  publish();
}

std::size_t CacheWriter::queued() const {
  std::lock_guard lock(queueMu_);
  return queue_.size();
}

PublishStats CacheWriter::stats() const {
  PublishStats s;
  {
    std::lock_guard lock(statsMu_);
    s = stats_;
  }
  std::lock_guard lock(queueMu_);
  s.writerWakeups = writerWakeups_;
  return s;
}

void CacheWriter::run(std::stop_token stop) {
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
      if (!deadlineQueue_.empty()) wakeAt = std::min(wakeAt, deadlineQueue_.front().first);
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
    auto now = Clock::now();
    expireAssumptions(now);
    if (dirty_ && (urgent || now - lastPublish_ >= options_.publishInterval)) publish();
  }
}

void CacheWriter::applyBatch(std::vector<Event>& batch) {
  if (batch.empty()) return;
  auto started = Clock::now();
  for (Event& event : batch) {
    std::visit([this](auto& e) { apply(e); }, event);
  }
  dirty_ = true;
  std::lock_guard lock(statsMu_);
  stats_.eventsApplied += batch.size();
  stats_.lastApply = Clock::now() - started;
}

void CacheWriter::trackPod(const std::string& key, const std::string& node) {
  auto old = nodeOfPod_.find(key);
  if (old != nodeOfPod_.end()) {
    if (old->second == node) {
      dirtyRows_.insert(node);  // same node, new content
      return;
    }
    auto& keys = podsOfNode_[old->second];
    keys.erase(key);
    if (keys.empty()) podsOfNode_.erase(old->second);
    dirtyRows_.insert(old->second);
    nodeOfPod_.erase(old);
  }
  if (node.empty()) return;
  nodeOfPod_[key] = node;
  podsOfNode_[node].insert(key);
  dirtyRows_.insert(node);
}

void CacheWriter::apply(WatchedObject& object) {
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
    std::string key = model::objectKey(p->ns, p->name);
    if (!model::mayHoldGpu(*p)) {
      index_.removePod(p->ns, p->name);
      trackPod(key, "");
      return;
    }
    if (unchanged(cluster.pods, key, *p)) return;
    bool bound = !p->nodeName.empty() && !model::isTerminal(*p);
    std::string node = bound ? p->nodeName : std::string();
    index_.upsertPod(*p);
    trackPod(key, node);
    return;
  }
  std::visit(Overloaded{
                 [&](model::Node& n) {
                   if (unchanged(cluster.nodes, n.name, n)) return;
                   index_.upsertNode(n);
                   baseDirty_ = true;
                 },
                 [&](model::Pod&) {},
                 [&](model::Namespace& n) {
                   if (unchanged(cluster.namespaces, n.name, n)) return;
                   index_.upsertNamespace(n);
                   baseDirty_ = true;
                 },
                 [&](model::HierarchicalResourceQuota& q) {
                   cluster.hrqs[model::objectKey(q.ns, q.name)] = std::move(q);
                   baseDirty_ = true;
                 },
                 [&](model::ResourceQuota& q) {
                   cluster.quotas[model::objectKey(q.ns, q.name)] = std::move(q);
                   baseDirty_ = true;
                 },
                 [&](model::DeviceClass& c) {
                   if (unchanged(cluster.classes, c.name, c)) return;
                   index_.upsertClass(c);
                   baseDirty_ = true;
                 },
                 [&](model::GpuDevice& d) {
                   if (unchanged(cluster.devices, model::objectKey(d.ns, d.name), d)) return;
                   index_.upsertDevice(d);
                   baseDirty_ = true;
                 },
                 [&](model::VirtualMachineInstance& v) {
                   if (unchanged(cluster.vmis, model::objectKey(v.ns, v.name), v)) return;
                   index_.upsertVmi(v);
                   baseDirty_ = true;
                 },
                 [&](model::Organization& o) {
                   cluster.organizations[model::objectKey(o.ns, o.name)] = std::move(o);
                   baseDirty_ = true;
                 },
                 [&](std::optional<model::BillingPlans>& p) {
                   if (p) cluster.plans = std::move(p);
                   baseDirty_ = true;
                 },
                 [&](std::vector<model::PermittedHostDevice>& d) {
                   cluster.permittedHostDevices = std::move(d);
                   baseDirty_ = true;
                 },
                 [&](model::Ledger& l) {
                   cluster.ledger = std::move(l);
                   baseDirty_ = true;
                 },
             },
             object);
}

void CacheWriter::apply(Remove& r) {
  model::Cluster& cluster = index_.mutableClusterForUntrackedKinds();
  std::string key = model::objectKey(r.ns, r.name);
  if (r.kind != model::Kind::Pod) baseDirty_ = true;
  switch (r.kind) {
    case model::Kind::Node: index_.removeNode(r.name); break;
    case model::Kind::Pod:
      index_.removePod(r.ns, r.name);
      trackPod(key, "");
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
  }
}

void CacheWriter::apply(Synced& s) {
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

void CacheWriter::apply(Assume& a) {
  const model::Cluster& cluster = index_.cluster();
  auto it = cluster.pods.find(model::objectKey(a.ns, a.name));
  if (it == cluster.pods.end() || (!a.uid.empty() && it->second.uid != a.uid)) {
    a.done->set_value(AssumeOutcome::PodUnknown);
    return;
  }
  if (it->second.nodeName.empty()) {
    // Binds are serialised here, on the writer thread: each one is checked by
    // the model against the live index, which already holds every earlier
    // assumption, so two binds can never take the same units.
    auto node = cluster.nodes.find(a.node);
    model::PodDemand demand = model::podDemand(cluster, index_, it->second);
    if (node == cluster.nodes.end() ||
        model::filterNode(cluster, index_, demand, node->second).verdict != model::Verdict::Fits) {
      a.done->set_value(AssumeOutcome::NoLongerFits);
      return;
    }
    index_.assume(it->second, a.node);
    const auto deadline = Clock::now() + options_.assumeTtl;
    assumeDeadline_[it->second.uid] = deadline;
    deadlineQueue_.emplace_back(deadline, it->second.uid);
  }
  waitingForPublish_.push_back(std::move(a.done));
}

void CacheWriter::apply(Forget& f) {
  index_.forget(f.uid);
  assumeDeadline_.erase(f.uid);
}

void CacheWriter::expireAssumptions(Clock::time_point now) {
  std::uint64_t expired = 0;
  while (!deadlineQueue_.empty() && deadlineQueue_.front().first <= now) {
    auto [deadline, uid] = std::move(deadlineQueue_.front());
    deadlineQueue_.pop_front();
    auto it = assumeDeadline_.find(uid);
    if (it == assumeDeadline_.end() || it->second != deadline) continue;  // forgotten, or assumed again since
    assumeDeadline_.erase(it);
    // A no-op when the watch already confirmed the pod bound.
    std::size_t before = index_.assumedCount();
    index_.forget(uid);
    if (index_.assumedCount() != before) {
      ++expired;
      dirty_ = true;
    }
  }
  if (expired) {
    std::lock_guard lock(statsMu_);
    stats_.assumptionsExpired += expired;
  }
}

void CacheWriter::publish() {
  auto started = Clock::now();
  auto snap = std::make_unique<ExtenderSnapshot>();
  const model::Cluster& c = index_.cluster();
  const bool copyCluster = baseDirty_ || !base_;
  if (copyCluster) {
    auto out = std::make_shared<model::Cluster>(c.withoutPods());
    // `now` only dates audits and reports, which the extender does not run: the
    // copy keeps the time it was taken.
    out->now = options_.clock();
    base_ = std::move(out);
    baseDirty_ = false;
  }
  snap->base = base_;
  snap->usage = index_.snapshot();
  model::UsageIndex::TouchedNodes touched = index_.takeTouchedNodes();
  if (copyCluster || touched.all || !published_) {
    snap->fit = model::FitTable::build(*base_, snap->usage);
  } else {
    snap->fit = model::FitTable::update(published_->fit, *base_, snap->usage, touched.nodes);
  }

  std::size_t rebuilt = dirtyRows_.size();
  for (const std::string& node : dirtyRows_) {
    auto keys = podsOfNode_.find(node);
    if (keys == podsOfNode_.end()) {
      rows_.erase(node);
      continue;
    }
    auto row = std::make_shared<BoundPods>();
    row->reserve(keys->second.size());
    for (const std::string& key : keys->second) {
      auto pod = c.pods.find(key);
      if (pod != c.pods.end()) row->push_back(pod->second);
    }
    rows_[node] = std::move(row);
  }
  dirtyRows_.clear();
  snap->podsOnNode = rows_;
  snap->generation = ++generation_;
  for (model::Kind kind : model::kAllKinds) {
    if (!synced_.contains(kind)) snap->unsynced.push_back(kind);
  }
  snap->assumedPlacements = index_.assumedCount();
  auto built = Clock::now();
  snap->publishedAt = built;
  const std::size_t shared = snap->fit.blocksShared();
  published_ = snap.get();
  cell_.publish(std::move(snap));
  lastPublish_ = built;
  dirty_ = false;
  for (auto& p : waitingForPublish_) p->set_value(AssumeOutcome::Recorded);
  waitingForPublish_.clear();
  std::lock_guard lock(statsMu_);
  ++stats_.publishes;
  stats_.lastPublish = built - started;
  stats_.lastRowsRebuilt = rebuilt;
  stats_.lastCopiedCluster = copyCluster;
  stats_.clusterCopies += copyCluster ? 1 : 0;
  stats_.lastFitBlocksShared = shared;
}

}  // namespace tally::extender
