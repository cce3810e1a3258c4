#include "tally/runtime/leader_election.hpp"

#include <future>

#include <random>

#include "tally/runtime/json_watch.hpp"
#include "tally/common/log.hpp"

namespace tally::runtime {

LeaderElector::LeaderElector(std::shared_ptr<Client> client, LeaderElectionConfig cfg)
    : client_(std::move(client)), cfg_(std::move(cfg)), resource_(leaseResource(cfg_.leaseNamespace)) {}

LeaderElector::~LeaderElector() { stop(); }

void LeaderElector::start() {
  thread_ = std::jthread([this](std::stop_token st) { run(st); });
}

void LeaderElector::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

std::string LeaderElector::observedLeader() const {
  std::lock_guard lock(mu_);
  return observedHolder_;
}

bool LeaderElector::sleepFor(std::stop_token& st, std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, st, d, [] { return false; });
  return !st.stop_requested();
}

std::string LeaderElector::leaseBody(const std::string& holder, int32_t durationSeconds, const std::string& acquireTime,
                                     int32_t transitions, const std::string& now) const {
  return R"({"spec":{"holderIdentity":)" + jsonString(holder) + R"(,"leaseDurationSeconds":)" +
         std::to_string(durationSeconds) + R"(,"acquireTime":)" + jsonString(acquireTime) + R"(,"renewTime":)" +
         jsonString(now) + R"(,"leaseTransitions":)" + std::to_string(transitions) + "}}";
}

Result<bool> LeaderElector::tryAcquireOrRenew() {
  const std::string now = formatMicroTime(std::chrono::system_clock::now());
  const int32_t durationSeconds =
      static_cast<int32_t>(std::chrono::duration_cast<std::chrono::seconds>(cfg_.leaseDuration).count());
  auto body = client_->get(resource_, cfg_.leaseName);
  if (!body) {
    if (!body.error().is(ErrorCode::kNotFound)) return std::move(body).error();
    std::string create = R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":)" +
                         jsonString(cfg_.leaseName) + R"(,"namespace":)" + jsonString(cfg_.leaseNamespace) + "}," +
                         leaseBody(cfg_.identity, durationSeconds, now, 0, now).substr(1);
    auto created = client_->create(resource_, std::move(create));
    if (!created) {
      if (created.error().is(ErrorCode::kAlreadyExists) || created.error().is(ErrorCode::kConflict)) return false;
      return std::move(created).error();
    }
    auto lease = decodeJsonObject<LeaseCodec>(*created);
    std::lock_guard lock(mu_);
    observedHolder_ = cfg_.identity;
    observedAt_ = std::chrono::steady_clock::now();
    if (lease) observedRv_ = lease->metadata.resourceVersion;
    observedAcquireTime_ = now;
    observedTransitions_ = 0;
    return true;
  }
  auto lease = decodeJsonObject<LeaseCodec>(*body);
  if (!lease) return std::move(lease).error().withContext("lease " + cfg_.leaseName);

  const auto steadyNow = std::chrono::steady_clock::now();
  std::string previousHolder;
  {
    std::lock_guard lock(mu_);
    previousHolder = observedHolder_;
    if (lease->metadata.resourceVersion != observedRv_) {
      observedRv_ = lease->metadata.resourceVersion;
      observedHolder_ = lease->holderIdentity;
      observedAt_ = steadyNow;
    }
  }
  if (lease->holderIdentity != previousHolder && !lease->holderIdentity.empty() && cfg_.onNewLeader) {
    cfg_.onNewLeader(lease->holderIdentity);
  }
  const bool mine = lease->holderIdentity == cfg_.identity;
  std::chrono::milliseconds duration = cfg_.leaseDuration;
  if (lease->leaseDurationSeconds > 0) duration = std::chrono::seconds(lease->leaseDurationSeconds);
  bool valid;
  {
    std::lock_guard lock(mu_);
    valid = observedAt_ + duration > steadyNow;
  }
  if (!mine && !lease->holderIdentity.empty() && valid) return false;

  const std::string acquireTime = mine && !lease->acquireTime.empty() ? lease->acquireTime : now;
  const int32_t transitions = mine ? lease->leaseTransitions : lease->leaseTransitions + 1;
  // resourceVersion in a merge patch is a precondition: a racing writer gets 409.
  std::string patch = R"({"metadata":{"resourceVersion":)" + jsonString(lease->metadata.resourceVersion) + "}," +
                      leaseBody(cfg_.identity, durationSeconds, acquireTime, transitions, now).substr(1);
  auto updated = client_->patch(resource_, cfg_.leaseName, PatchType::kMerge, std::move(patch));
  if (!updated) {
    if (updated.error().is(ErrorCode::kConflict)) return false;
    return std::move(updated).error();
  }
  auto fresh = decodeJsonObject<LeaseCodec>(*updated);
  std::lock_guard lock(mu_);
  observedHolder_ = cfg_.identity;
  observedAt_ = std::chrono::steady_clock::now();
  if (fresh) observedRv_ = fresh->metadata.resourceVersion;
  if (!mine) transitions_.fetch_add(1);
  return true;
}

Status LeaderElector::release() {
  auto body = client_->get(resource_, cfg_.leaseName);
  if (!body) return std::move(body).error();
  auto lease = decodeJsonObject<LeaseCodec>(*body);
  if (!lease) return std::move(lease).error();
  if (lease->holderIdentity != cfg_.identity) return {};
  const std::string now = formatMicroTime(std::chrono::system_clock::now());
  std::string patch = R"({"metadata":{"resourceVersion":)" + jsonString(lease->metadata.resourceVersion) + "}," +
                      leaseBody("", 1, now, lease->leaseTransitions, now).substr(1);
  auto r = client_->patch(resource_, cfg_.leaseName, PatchType::kMerge, std::move(patch));
  if (!r) return std::move(r).error();
  return {};
}

void LeaderElector::run(std::stop_token st) {
  std::mt19937 rng{std::random_device{}()};
  auto jittered = [&](std::chrono::milliseconds d) {
    std::uniform_real_distribution<double> dist(1.0, 1.2);
    return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(d.count()) * dist(rng)));
  };
  while (!st.stop_requested()) {
    // Campaign.
    for (;;) {
      auto acquired = tryAcquireOrRenew();
      if (!acquired) {
        logWarning("leader election failed", {{"lease", cfg_.leaseName}, {"error", acquired.error().describe()}});
      }
      if (acquired && *acquired) break;
      if (!sleepFor(st, jittered(cfg_.retryPeriod))) return;
    }
    leading_.store(true);
    logInfo("became leader", {{"identity", cfg_.identity}, {"lease", cfg_.leaseName}});
    std::jthread work;
    if (cfg_.onStartedLeading) work = std::jthread([this](std::stop_token ws) { cfg_.onStartedLeading(ws); });
    // Renew until stopped or the renew deadline passes. Each attempt runs on
    // its own thread and is waited for no longer than the deadline leaves: an
    // API server that does not answer (a partition, a black-holed connection)
    // holds a request for the client's timeout and retries, far past the
    // lease, and the leader must stop leading before another can take it.
    auto lastRenew = std::chrono::steady_clock::now();
    bool lost = false;
    std::future<Result<bool>> pending;
    while (sleepFor(st, cfg_.retryPeriod)) {
      pending = std::async(std::launch::async, [this] { return tryAcquireOrRenew(); });
      const auto left = cfg_.renewDeadline - (std::chrono::steady_clock::now() - lastRenew);
      if (pending.wait_for(std::max(left, std::chrono::steady_clock::duration::zero())) != std::future_status::ready) {
        logWarning(
            "lease renew did not answer within the renew deadline; stopping leading",
            {{"lease", cfg_.leaseName}, {"renewDeadlineMs", static_cast<std::int64_t>(cfg_.renewDeadline.count())}});
        lost = true;
        break;
      }
      auto renewed = pending.get();
      const auto now = std::chrono::steady_clock::now();
      if (renewed && *renewed) {
        lastRenew = now;
        continue;
      }
      if (!renewed)
        logWarning("lease renew failed", {{"lease", cfg_.leaseName}, {"error", renewed.error().describe()}});
      const bool takenOver = renewed && !*renewed && observedLeader() != cfg_.identity;
      if (now - lastRenew >= cfg_.renewDeadline || takenOver) {
        lost = true;
        break;
      }
    }
    leading_.store(false);
    logInfo("stopped leading", {{"identity", cfg_.identity}, {"lease", cfg_.leaseName}, {"lost", lost}});
    if (work.joinable()) {
      work.request_stop();
      work.join();
    }
    // The renew still out is waited for only now, when nothing leads here.
    if (pending.valid()) pending.wait();
    if (cfg_.onStoppedLeading) cfg_.onStoppedLeading();
    if (!lost && cfg_.releaseOnStop) {
      if (auto s = release(); !s) {
        logWarning("lease release failed", {{"lease", cfg_.leaseName}, {"error", s.error().describe()}});
      }
    }
  }
}

}  // namespace tally::runtime
