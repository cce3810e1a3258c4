#include "tally/extender/assumptions.hpp"

#include <algorithm>

#include "tally/model/admission.hpp"
#include "tally/model/usage.hpp"

namespace tally::extender {

void Assumptions::assume(model::UsageIndex& index, Assume& a) {
  const model::Cluster& cluster = index.cluster();
  auto it = cluster.pods.find(model::objectKey(a.ns, a.name));
  if (it == cluster.pods.end() || (!a.uid.empty() && it->second.uid != a.uid)) {
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
  trackPod(key, bound ? pod->nodeName : std::string());
}

void Assumptions::trackPod(const std::string& key, const std::string& node) {
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

bool Assumptions::tick(model::UsageIndex& index, Clock::time_point now) {
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
  return expired != 0;
}

Assumptions::Clock::time_point Assumptions::nextDeadline() const {
  return deadlineQueue_.empty() ? Clock::time_point::max() : deadlineQueue_.front().first;
}

std::shared_ptr<const BoundPodRows> Assumptions::publish(const model::Cluster& live) {
  lastRowsRebuilt_.store(dirtyRows_.size(), std::memory_order_relaxed);
  for (const std::string& node : dirtyRows_) {
    auto keys = podsOfNode_.find(node);
    if (keys == podsOfNode_.end()) {
      rows_.erase(node);
      continue;
    }
    auto row = std::make_shared<BoundPods>();
    row->reserve(keys->second.size());
    for (const std::string& key : keys->second) {
      auto pod = live.pods.find(key);
      if (pod != live.pods.end()) row->push_back(pod->second);
    }
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
    : detail::AssumptionsMember{Assumptions(options.assumeTtl)},
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
  return s;
}

}  // namespace tally::extender
