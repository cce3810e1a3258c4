#include "tally/controller/pool_auditor.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/model/units.hpp"

namespace tally::controller {

namespace obs = tally::observability;
using runtime::ReconcileResult;

namespace {

const runtime::Resource& classesResource() {
  static const runtime::Resource res = runtime::Resource::of("gpu.tally.dev", "v1alpha1", "gpudeviceclasses");
  return res;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

Condition invariantCondition(const model::PoolInvariant& inv) {
  Condition c;
  c.type = std::string(kInvariantCondition);
  if (!inv.unknown.empty()) {
    c.status = "Unknown";
    c.reason = "TermsUnknown";
    c.message = fmt::format("the invariant of pool {} cannot be evaluated: {}", inv.pool, joined(inv.unknown));
  } else if (inv.holds()) {
    c.status = "True";
    c.reason = "Holds";
    c.message = inv.equation();
  } else {
    c.status = "False";
    c.reason = "InvariantBroken";
    c.message = fmt::format("{}: oversold by {} unit(s)", inv.equation(), -inv.headroom);
  }
  return c;
}

}  // namespace

PoolAudit auditOf(const model::Cluster& cluster, const model::DeviceClass& pool, const model::AuditOptions& options) {
  PoolAudit a;
  a.invariant = model::evaluateInvariant(cluster, pool);
  a.findings = model::auditPool(cluster, pool, options);
  a.gate = model::evaluateGate(cluster, pool, a.findings);
  return a;
}

std::string gateReason(const model::GateState& gate) { return std::string(model::toString(gate.why)); }

PoolStatus desiredStatus(const PoolAudit& audit, const model::DeviceClass& pool, const PoolStatus* current,
                         std::string_view now) {
  const model::PoolInvariant& inv = audit.invariant;
  const model::PoolFigures figures = model::poolFigures(inv);
  PoolStatus s;
  s.nodeMode = std::string(model::toString(pool.nodeMode));
  s.quotaUnit = inv.quotaUnit;
  s.healthySchedulableDevices = figures.healthySchedulableDevices;
  s.healthySchedulableUnits = figures.healthySchedulableUnits;
  s.reservedDevices = figures.reservedDevices;
  s.reservedUnits = figures.reservedUnits;
  s.nonReservedHardQuota = figures.nonReservedHardQuota;
  s.spareDevices = figures.spareDevices;
  s.spareUnits = figures.spareUnits;
  s.headroom = figures.headroom;
  s.inFlightTransaction = audit.gate.transaction;
  s.gateFailureId = audit.gate.open ? std::string() : audit.gate.failureId;
  s.lastAuditTime = std::string(now);
  for (const auto& f : audit.findings) {
    if (s.findings.size() == kMaxPublishedFindings) break;
    s.findings.push_back(
        {std::string(model::toString(f.code)), truncatedText(f.message, 4096), truncatedText(f.subject, 512)});
  }
  if (current) s.conditions = current->conditions;
  std::erase_if(s.conditions,
                [](const Condition& c) { return c.type != kInvariantCondition && c.type != kCreationOpenCondition; });
  setCondition(s.conditions, invariantCondition(inv), now);
  Condition gate;
  gate.type = std::string(kCreationOpenCondition);
  gate.status = audit.gate.open ? "True" : "False";
  gate.reason = gateReason(audit.gate);
  gate.message = truncatedText(audit.gate.reason, 32768);
  setCondition(s.conditions, std::move(gate), now);
  std::sort(s.conditions.begin(), s.conditions.end(),
            [](const Condition& a, const Condition& b) { return a.type < b.type; });
  return s;
}

std::vector<PoolEvent> statusEvents(const std::string& pool, const PoolStatus* before, const PoolStatus& after) {
  std::vector<PoolEvent> out;
  auto find = [](const PoolStatus* s, std::string_view type) -> const Condition* {
    return s ? findCondition(s->conditions, type) : nullptr;
  };
  const Condition* gateBefore = find(before, kCreationOpenCondition);
  const Condition* gateAfter = find(&after, kCreationOpenCondition);
  if (gateAfter &&
      (!gateBefore || gateBefore->status != gateAfter->status || gateBefore->reason != gateAfter->reason)) {
    if (gateAfter->status == "True") {
      out.push_back(
          {"Normal", "CreationOpened", fmt::format("creation in pool {} is open: {}", pool, gateAfter->message)});
    } else {
      out.push_back(
          {"Warning", "CreationClosed",
           fmt::format("creation in pool {} is closed ({}{}): {}", pool, gateAfter->reason,
                       after.gateFailureId.empty() ? "" : ", failure " + after.gateFailureId, gateAfter->message)});
    }
  }
  const Condition* invBefore = find(before, kInvariantCondition);
  const Condition* invAfter = find(&after, kInvariantCondition);
  if (invAfter && (!invBefore || invBefore->status != invAfter->status)) {
    if (invAfter->status == "True") {
      out.push_back({"Normal", "InvariantHolds", invAfter->message});
    } else {
      out.push_back({"Warning", "InvariantBroken", invAfter->message});
    }
  }
  return out;
}

// --- The controller ----------------------------------------------------------

struct PoolAuditor::Metrics {
  explicit Metrics(obs::Registry& r)
      : units(r.gauge("tally_controller_pool_units",
                      "Terms of each pool's capacity invariant in the pool's quota unit (healthy, reserved, quota, "
                      "spare).",
                      {"pool", "term"})),
        headroom(r.gauge("tally_controller_pool_headroom",
                         "Healthy units minus reserved, non-reserved hard quota and spare; negative when oversold.",
                         {"pool"})),
        gateOpen(r.gauge("tally_controller_pool_gate_open", "1 when the pool's creation gate is open.", {"pool"})),
        findings(r.gauge("tally_controller_audit_findings", "Findings of the pool's last audit, by code.",
                         {"pool", "code"})),
        seconds(r.histogram("tally_controller_audit_seconds", "Time to audit one pool (model only).",
                            obs::exponentialBuckets(0.0001, 4, 10))
                    .with({})),
        audits(r.counter("tally_controller_audits_total", "Pool audits run.").with({})),
        stuck(r.gauge("tally_controller_release_stuck",
                      "1 while a reservation record has been releasing longer than --release-stuck-after.",
                      {"pool", "record"})) {}
  obs::Family<obs::Gauge>& units;
  obs::Family<obs::Gauge>& headroom;
  obs::Family<obs::Gauge>& gateOpen;
  obs::Family<obs::Gauge>& findings;
  obs::Histogram& seconds;
  obs::Counter& audits;
  obs::Family<obs::Gauge>& stuck;
};

PoolAuditor::PoolAuditor(std::shared_ptr<runtime::Client> client, PoolAuditorOptions options)
    : LeaderController(std::move(client), {"pool-auditor", options.component, options.instance}),
      options_(std::move(options)) {
  if (options_.metrics) metrics_ = std::make_unique<Metrics>(*options_.metrics);
}

PoolAuditor::~PoolAuditor() = default;

std::int64_t PoolAuditor::now() const {
  return options_.clock ? options_.clock() : toUnixTime(std::chrono::system_clock::now()).seconds;
}

// A new term trusts nothing it wrote in the last one: the first audit of each
// pool reads what the class holds.
void PoolAuditor::startTerm() {
  for (auto& [name, p] : pools_) p.written.reset();
  {
    // A term's queue starts empty: nothing scheduled in the last one will run.
    std::lock_guard lock(scheduledMu_);
    scheduled_.clear();
  }
  if (!cell_) return;
  auto snap = cell_->read();
  if (!snap) return;
  for (const auto& [name, cls] : snap->cluster().classes) enqueue(name, std::chrono::milliseconds(0));
}

// Every kind moves a term or a finding: pods and VMIs (a launcher's coverage)
// move a node's used units, which the over-commit check reads. Only the nodes
// a pod, claim or device left or came to are looked at again after a batch of
// them: under churn (a claim allocated and its pod bound, per pod) the check
// reads two nodes, not every node of every pool.
void PoolAuditor::objectChanged(model::Kind kind, const std::string& key) {
  wake_ = true;
  if (kind == model::Kind::ResourceClaim || kind == model::Kind::GpuDevice) {
    movedHolders_.emplace_back(kind, key);
  } else {
    allNodesDirty_ = true;
  }
}

void PoolAuditor::podChanged(const std::string& key, const model::Pod* pod) {
  wake_ = true;
  moved(podNode_, key, pod ? pod->nodeName : std::string());
}

void PoolAuditor::moved(std::unordered_map<std::string, std::string>& nodes, const std::string& key,
                        const std::string& node) {
  auto it = nodes.find(key);
  if (it != nodes.end()) {
    dirtyNodes_.insert(it->second);
    if (node.empty()) {
      nodes.erase(it);
    } else {
      it->second = node;
    }
  } else if (!node.empty()) {
    nodes.emplace(key, node);
  }
  if (!node.empty()) dirtyNodes_.insert(node);
}

void PoolAuditor::applied(const model::UsageIndex& index) {
  const model::Cluster& live = index.cluster();
  for (const auto& [kind, key] : movedHolders_) {
    if (kind == model::Kind::ResourceClaim) {
      auto claim = live.resourceClaims.find(key);
      moved(claimNode_, key, claim == live.resourceClaims.end() ? std::string() : claim->second.allocatedNode);
    } else {
      auto device = live.devices.find(key);
      moved(deviceNode_, key, device == live.devices.end() ? std::string() : device->second.node);
    }
  }
  movedHolders_.clear();
  if (!allNodesDirty_ && dirtyNodes_.empty()) return;
  auto check = [&](const std::string& name, const model::Node& node) {
    for (const auto& [className, cls] : live.classes) {
      if (!model::inPool(node, cls)) continue;
      if (auto over = model::nodeOvercommit(live, node, cls, index)) {
        overcommitted_.emplace(name, std::move(*over));
        return;
      }
    }
  };
  if (allNodesDirty_) {
    overcommitted_.clear();
    for (const auto& [name, node] : live.nodes) check(name, node);
  } else {
    for (const auto& name : dirtyNodes_) {
      overcommitted_.erase(name);
      if (auto node = live.nodes.find(name); node != live.nodes.end()) check(name, node->second);
    }
  }
  allNodesDirty_ = false;
  dirtyNodes_.clear();
  overcommits_.store(std::make_shared<const std::map<std::string, model::NodeOvercommit>>(overcommitted_));
}

void PoolAuditor::nameHolders(PoolAudit& audit) const {
  const auto over = overcommits_.load();
  if (!over) return;
  for (auto& f : audit.findings) {
    if (f.code != model::FindingCode::NodeOvercommitted || !f.subject.starts_with("node/")) continue;
    auto it = over->find(f.subject.substr(5));
    if (it == over->end() || it->second.pods.empty() || f.message.find("; pods: ") != std::string::npos) continue;
    f.message += "; pods: " + joined(it->second.pods);
  }
}

void PoolAuditor::published(const state::Snapshot& snapshot) {
  // Before the caches first synced there is nothing to audit yet; after, a
  // cache that stops being current is audited too (a StaleCapacity finding).
  everReady_ = everReady_ || snapshot.ready();
  if (!wake_ || !everReady_) return;
  wake_ = false;
  std::lock_guard lock(scheduledMu_);
  for (const auto& [name, cls] : snapshot.cluster().classes) {
    if (scheduled_.insert(name).second) enqueue(name, options_.debounce);
  }
}

void PoolAuditor::event(const std::string& pool, const std::string& uid, const PoolEvent& e) {
  LeaderController::event({"gpu.tally.dev/v1alpha1", "GPUDeviceClass", "", pool, uid}, e.type, e.reason, e.message);
}

void PoolAuditor::record(const std::string& pool, const PoolAudit& audit, Pool& state, double seconds) {
  if (!metrics_) return;
  metrics_->audits.inc();
  metrics_->seconds.observe(seconds);
  const auto& inv = audit.invariant;
  metrics_->units.with({pool, "healthy"}).set(static_cast<double>(inv.healthy.units));
  metrics_->units.with({pool, "reserved"}).set(static_cast<double>(inv.reserved.units));
  metrics_->units.with({pool, "quota"}).set(static_cast<double>(inv.nonReservedHard.units));
  metrics_->units.with({pool, "spare"}).set(static_cast<double>(inv.spare.units));
  metrics_->headroom.with({pool}).set(static_cast<double>(inv.headroom));
  metrics_->gateOpen.with({pool}).set(audit.gate.open ? 1 : 0);
  std::map<std::string, int> counts;
  for (const auto& f : audit.findings) counts[std::string(model::toString(f.code))]++;
  for (const auto& code : state.findingCodes) {
    if (!counts.contains(code)) metrics_->findings.with({pool, code}).set(0);
  }
  state.findingCodes.clear();
  for (const auto& [code, n] : counts) {
    metrics_->findings.with({pool, code}).set(n);
    state.findingCodes.insert(code);
  }
}

void PoolAuditor::forget(const std::string& pool) {
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  if (metrics_) {
    metrics_->gateOpen.with({pool}).set(0);
    for (const auto& id : it->second.stuckReported) metrics_->stuck.with({pool, id}).set(0);
  }
  pools_.erase(it);
}

// Reservation records stuck in releasing (on the snapshot's ledger): an Event
// and the gauge once each, the gauge cleared when the release ends.
void PoolAuditor::reportStuck(const std::string& pool, Pool& state, const model::Cluster& cluster,
                              std::int64_t unixNow) {
  for (const auto& id :
       model::stuckReleases(cluster, pool, state.releasingSince, unixNow, options_.releaseStuckAfter.count())) {
    if (!state.stuckReported.insert(id).second) continue;
    event(pool, "",
          {"Warning", "ReleaseStuck",
           fmt::format("reservation record {} of pool {} has been releasing for more than {}s "
                       "(--release-stuck-after): finish or correct the release",
                       id, pool, options_.releaseStuckAfter.count())});
    if (metrics_) metrics_->stuck.with({pool, id}).set(1);
  }
  for (auto it = state.stuckReported.begin(); it != state.stuckReported.end();) {
    if (state.releasingSince.contains(*it)) {
      ++it;
      continue;
    }
    if (metrics_) metrics_->stuck.with({pool, *it}).set(0);
    it = state.stuckReported.erase(it);
  }
}

// The audit of `pool` at `unixNow` with this term's history, the findings'
// first sightings settled.
PoolAudit PoolAuditor::audit(const state::Snapshot& snap, const model::DeviceClass& pool, Pool& state,
                             std::int64_t unixNow) {
  // Convergent findings are converging for options_.audit.convergenceSeconds
  // from when this term first saw them (a new leader starts them again: its
  // gate stays closed meanwhile), then they are failures.
  model::AuditOptions o = options_.audit;
  o.firstSeen = &state.findingsSince;
  o.now = unixNow;
  // The snapshot keeps pods as sums only: the over-commit check reads them.
  o.usage = &snap.usage;
  PoolAudit found = auditOf(snap.cluster(), pool, o);
  nameHolders(found);
  state.findingsSince = model::settleFindings(found.findings, state.findingsSince, unixNow);
  return found;
}

// Again at the period, or earlier when the model says an unchanged pool is due.
ReconcileResult PoolAuditor::nextAudit(const model::Cluster& cluster, const PoolAudit& audit, const Pool& state,
                                       std::int64_t unixNow) const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      options_.interval - (std::chrono::steady_clock::now() - state.writtenAt));
  const auto due = model::auditDue(
      cluster, audit.findings, unixNow, options_.audit,
      {&state.findingsSince, &state.releasingSince, &state.stuckReported, options_.releaseStuckAfter.count()});
  if (due) left = std::min(left, std::chrono::milliseconds((*due - unixNow) * 1'000));
  return ReconcileResult::requeueAfter(std::max(left, std::chrono::milliseconds(1'000)));
}

runtime::Result<ReconcileResult> PoolAuditor::reconcile(const std::string& pool, std::stop_token) {
  using std::chrono::steady_clock;
  if (!cell_) return ReconcileResult::done();
  {
    // Changes published from here on schedule the next audit: this one reads
    // the snapshot below.
    std::lock_guard lock(scheduledMu_);
    scheduled_.erase(pool);
  }
  auto snap = cell_->read();
  // Until every cache synced once, an audit would only find them unsynced and
  // close every gate at each restart: it waits (the manager starts the leader's
  // work once they have). A cache that stops being current later is a finding.
  if (!sawReady_) {
    if (!snap || !snap->ready())
      return ReconcileResult::requeueAfter(std::max(options_.debounce, std::chrono::milliseconds(1'000)));
    sawReady_ = true;
  }
  const model::Cluster& cluster = snap->cluster();
  auto found = cluster.classes.find(pool);
  if (found == cluster.classes.end()) {
    forget(pool);
    return ReconcileResult::done();
  }
  Pool& state = pools_[pool];
  const std::int64_t unixNow = now();
  reportStuck(pool, state, cluster, unixNow);
  // On the snapshot's class first: nothing changed since the last write, and
  // the period is not due, is the common case and needs no read.
  const bool periodDue = !state.written || steady_clock::now() - state.writtenAt >= options_.interval;
  if (!periodDue) {
    const auto started = steady_clock::now();
    PoolAudit quick = audit(*snap, found->second, state, unixNow);
    PoolStatus candidate = desiredStatus(quick, found->second, &*state.written, formatRfc3339(unixNow));
    if (candidate.sameAs(*state.written)) {
      record(pool, quick, state, std::chrono::duration<double>(steady_clock::now() - started).count());
      return nextAudit(cluster, quick, state, unixNow);
    }
  }
  return auditAndWrite(*snap, pool, state, unixNow, periodDue);
}

// The class as the API server has it: its published failure id and its
// acknowledgements decide the gate; the status is written when it changed or
// the period is due.
runtime::Result<ReconcileResult> PoolAuditor::auditAndWrite(const state::Snapshot& snap, const std::string& pool,
                                                            Pool& state, std::int64_t unixNow, bool periodDue) {
  using std::chrono::steady_clock;
  auto body = client_->get(classesResource(), pool);
  if (!body) {
    if (body.error().is(runtime::ErrorCode::kNotFound)) {
      forget(pool);
      return ReconcileResult::done();
    }
    return std::move(body).error().withContext("read gpudeviceclass " + pool);
  }
  auto fresh = codec::decodeText<codec::DeviceClassCodec>(*body);
  if (!fresh) {
    return runtime::Error(runtime::ErrorCode::kDecode,
                          "gpudeviceclass " + pool + " cannot be read: " + fresh.error().describe());
  }
  std::string uid;
  auto current = decodePoolStatus(*body, &uid);
  if (!current) return runtime::Error(runtime::ErrorCode::kDecode, current.error().describe());
  const auto auditStarted = steady_clock::now();
  PoolAudit found = audit(snap, *fresh, state, unixNow);
  const double seconds = std::chrono::duration<double>(steady_clock::now() - auditStarted).count();
  PoolStatus desired = desiredStatus(found, *fresh, &*current, formatRfc3339(unixNow));
  record(pool, found, state, seconds);
  const bool due = periodDue && (current->lastAuditTime.empty() || [&] {
                     auto last = parseRfc3339(current->lastAuditTime);
                     return !last || unixNow - last->seconds >= options_.interval.count();
                   }());
  if (desired.sameAs(*current) && !due) {
    state.written = *current;
    if (state.writtenAt == steady_clock::time_point{}) state.writtenAt = steady_clock::now();
    return nextAudit(snap.cluster(), found, state, unixNow);
  }
  runtime::PatchOptions po;
  po.fieldManager = std::string(kAuditFieldManager);
  po.subresource = "status";
  auto patched = client_->patch(classesResource(), pool, runtime::PatchType::kMerge, statusPatch(desired), po);
  if (!patched) {
    if (patched.error().is(runtime::ErrorCode::kNotFound)) {
      forget(pool);
      return ReconcileResult::done();
    }
    return std::move(patched).error().withContext("status of gpudeviceclass " + pool);
  }
  for (const auto& e : statusEvents(pool, &*current, desired)) event(pool, uid, e);
  if (!desired.sameAs(*current)) {
    const Condition* gate = findCondition(desired.conditions, kCreationOpenCondition);
    logInfo("pool audited", {{"pool", pool},
                             {"gate", gate ? gate->status : ""},
                             {"reason", gate ? gate->reason : ""},
                             {"failureId", desired.gateFailureId},
                             {"findings", static_cast<std::int64_t>(desired.findings.size())},
                             {"headroom", desired.headroom}});
  }
  state.written = desired;
  state.writtenAt = steady_clock::now();
  return nextAudit(snap.cluster(), found, state, unixNow);
}

}  // namespace tally::controller
