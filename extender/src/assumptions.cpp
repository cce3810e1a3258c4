#include "tally/extender/assumptions.hpp"

#include <algorithm>

#include "tally/model/admission.hpp"
#include "tally/model/usage.hpp"

namespace tally::extender {

void Assumptions::assume(model::UsageIndex& index, Assume& a) { decide(index, a, false); }

void Assumptions::decide(model::UsageIndex& index, Assume& a, bool arrived) {
  const model::Cluster& cluster = index.cluster();
  const std::string key = model::objectKey(a.ns, a.name);
  auto it = cluster.pods.find(key);
  if (it == cluster.pods.end() || (!a.uid.empty() && it->second.uid != a.uid)) {
    // Not delivered yet (or the cache still holds the pod this one
    // replaced): wait for its event, bounded, rather than refuse a pod that
    // exists.
    if (!arrived && podWait_.count() > 0) {
      awaitingPod_[key].push_back({std::move(a), Clock::now() + podWait_});
      podWaitsStarted_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    a.done->set_value(AssumeOutcome::PodUnknown);
    return;
  }
  if (it->second.nodeName.empty()) {
    // The filter's decision, on what the filter decided on: the published
    // cluster, whose classes carry the gates the doors apply (with --gates
    // evaluated, the writer's own evaluation, which the live cluster lacks),
    // against the live usage (this writer's assumptions included).
    const model::Cluster& doors = gated_ ? *gated_ : cluster;
    auto node = doors.nodes.find(a.node);
    model::PodDemand demand = model::podDemand(doors, index, it->second);
    if (node == doors.nodes.end() ||
        model::filterNode(doors, index, demand, node->second).verdict != model::Verdict::Fits) {
      a.done->set_value(AssumeOutcome::NoLongerFits);
      return;
    }
    index.assume(it->second, a.node);
    const auto deadline = Clock::now() + ttl_;
    deadline_[it->second.uid] = deadline;
    deadlineQueue_.emplace_back(deadline, it->second.uid);
  }
  waitingForPublish_.push_back(std::move(a.done));
}

void Assumptions::forget(model::UsageIndex& index, const std::string& uid) {
  index.forget(uid);
  deadline_.erase(uid);
}

void Assumptions::podChanged(const std::string& key, const model::Pod* pod) {
  const bool bound = pod && !pod->nodeName.empty() && !model::isTerminal(*pod);
  trackPod(key, bound ? std::make_shared<const model::Pod>(*pod) : nullptr);
  if (!pod || awaitingPod_.empty()) return;
  auto waiting = awaitingPod_.find(key);
  if (waiting == awaitingPod_.end()) return;
  auto& binds = waiting->second;
  for (auto b = binds.begin(); b != binds.end();) {
    if (b->assume.uid.empty() || b->assume.uid == pod->uid) {
      arrived_.push_back(std::move(b->assume));
      b = binds.erase(b);
    } else {
      ++b;
    }
  }
  if (binds.empty()) awaitingPod_.erase(waiting);
}

void Assumptions::trackPod(const std::string& key, std::shared_ptr<const model::Pod> pod) {
  const std::string node = pod ? pod->nodeName : std::string();
  auto old = nodeOfPod_.find(key);
  if (old != nodeOfPod_.end()) {
    auto& pods = podsOfNode_[old->second];
    if (old->second == node) {
      pods[key] = std::move(pod);  // same node, new content
      dirtyRows_.insert(node);
      return;
    }
    pods.erase(key);
    if (pods.empty()) podsOfNode_.erase(old->second);
    dirtyRows_.insert(old->second);
    nodeOfPod_.erase(old);
  }
  if (node.empty()) return;
  nodeOfPod_[key] = node;
  podsOfNode_[node][key] = std::move(pod);
  dirtyRows_.insert(node);
}

bool Assumptions::tick(model::UsageIndex& index, Clock::time_point now) {
  // Binds whose pod has just arrived, decided on the index that holds it.
  const bool decided = !arrived_.empty();
  if (decided) {
    podArrivals_.fetch_add(arrived_.size(), std::memory_order_relaxed);
    std::vector<Assume> arrived;
    arrived.swap(arrived_);
    for (Assume& a : arrived) decide(index, a, true);
  }
  // Binds whose pod never came: refused as before, the scheduler retries.
  for (auto waiting = awaitingPod_.begin(); waiting != awaitingPod_.end();) {
    auto& binds = waiting->second;
    for (auto b = binds.begin(); b != binds.end();) {
      if (b->until > now) {
        ++b;
        continue;
      }
      b->assume.done->set_value(AssumeOutcome::PodUnknown);
      podWaitsTimedOut_.fetch_add(1, std::memory_order_relaxed);
      b = binds.erase(b);
    }
    waiting = binds.empty() ? awaitingPod_.erase(waiting) : std::next(waiting);
  }
  std::uint64_t expired = 0;
  while (!deadlineQueue_.empty() && deadlineQueue_.front().first <= now) {
    auto [deadline, uid] = std::move(deadlineQueue_.front());
    deadlineQueue_.pop_front();
    auto it = deadline_.find(uid);
    if (it == deadline_.end() || it->second != deadline) continue;  // forgotten, or assumed again since
    deadline_.erase(it);
    // A no-op when the watch already confirmed the pod bound.
    std::size_t before = index.assumedCount();
    index.forget(uid);
    if (index.assumedCount() != before) ++expired;
  }
  if (expired) expired_.fetch_add(expired, std::memory_order_relaxed);
  return expired != 0 || decided;
}

Assumptions::Clock::time_point Assumptions::nextDeadline() const {
  if (!arrived_.empty()) return Clock::time_point::min();
  auto at = deadlineQueue_.empty() ? Clock::time_point::max() : deadlineQueue_.front().first;
  for (const auto& [key, binds] : awaitingPod_)
    for (const auto& b : binds) at = std::min(at, b.until);
  return at;
}

std::shared_ptr<const BoundPodRows> Assumptions::publish(const model::Cluster& /*live*/) {
  lastRowsRebuilt_.store(dirtyRows_.size(), std::memory_order_relaxed);
  for (const std::string& node : dirtyRows_) {
    auto pods = podsOfNode_.find(node);
    if (pods == podsOfNode_.end()) {
      rows_.erase(node);
      continue;
    }
    auto row = std::make_shared<BoundPods>();
    row->reserve(pods->second.size());
    for (const auto& [key, pod] : pods->second) row->push_back(pod);
    rows_[node] = std::move(row);
  }
  dirtyRows_.clear();
  return std::make_shared<const BoundPodRows>(rows_);
}

void Assumptions::published(const state::Snapshot& snapshot) {
  gated_ = snapshot.base;
  for (auto& p : waitingForPublish_) p->set_value(AssumeOutcome::Recorded);
  waitingForPublish_.clear();
}

void Assumptions::stopped() {
  for (auto& p : waitingForPublish_) p->set_value(AssumeOutcome::NotPublished);
  waitingForPublish_.clear();
  for (auto& a : arrived_) a.done->set_value(AssumeOutcome::NotPublished);
  arrived_.clear();
  for (auto& [key, binds] : awaitingPod_)
    for (auto& b : binds) b.assume.done->set_value(AssumeOutcome::NotPublished);
  awaitingPod_.clear();
}

namespace {

state::Writer::Options stateOptions(CacheWriter::Options options, Assumptions* assumptions) {
  state::Writer::Options o;
  o.publishInterval = options.publishInterval;
  o.watched = std::move(options.watched);
  o.clock = std::move(options.clock);
  o.observers = {assumptions};
  o.extensions = {assumptions};
  o.gates = options.gates;
  o.gateAudit = options.gateAudit;
  o.gateEvaluationInterval = options.gateEvaluationInterval;
  o.tenancy = std::move(options.tenancy);
  return o;
}

}  // namespace

CacheWriter::CacheWriter(Options options)
    : detail::AssumptionsMember{Assumptions(options.assumeTtl, options.bindPodWait)},
      state::Writer(stateOptions(std::move(options), &assumptions)) {}

std::future<AssumeOutcome> CacheWriter::assume(std::string ns, std::string name, std::string uid, std::string node) {
  auto done = std::make_shared<std::promise<AssumeOutcome>>();
  auto future = done->get_future();
  Assumptions::Assume a{std::move(ns), std::move(name), std::move(uid), std::move(node), std::move(done)};
  post([this, a = std::move(a)](model::UsageIndex& index) mutable { assumptions.assume(index, a); }, true);
  return future;
}

void CacheWriter::forget(std::string uid) {
  post([this, uid = std::move(uid)](model::UsageIndex& index) { assumptions.forget(index, uid); }, true);
}

PublishStats CacheWriter::stats() const {
  PublishStats s;
  static_cast<state::PublishStats&>(s) = state::Writer::stats();
  s.lastRowsRebuilt = assumptions.lastRowsRebuilt();
  s.assumptionsExpired = assumptions.expired();
  s.bindPodWaitsStarted = assumptions.podWaitsStarted();
  s.bindPodArrivals = assumptions.podArrivals();
  s.bindPodWaitsTimedOut = assumptions.podWaitsTimedOut();
  return s;
}

}  // namespace tally::extender
