#include "tally/common/adaptive_limit.hpp"

#include <algorithm>
#include <utility>

namespace tally::common {

namespace {
AdaptiveLimit::Options sane(AdaptiveLimit::Options o) {
  o.min = std::max(1u, o.min);
  o.max = std::max(o.min, o.max);
  o.initial = std::clamp(o.initial, o.min, o.max);
  if (!(o.backoff > 0 && o.backoff < 1)) o.backoff = 0.7;
  return o;
}
}  // namespace

AdaptiveLimit::AdaptiveLimit(Options options) : options_(sane(options)), limit_(options_.initial) {}

AdaptiveLimit::Permit::Permit(Permit&& other) noexcept : owner_(other.owner_), granted_(other.granted_) {
  other.owner_ = nullptr;
}

AdaptiveLimit::Permit::~Permit() {
  // A permit dropped without an answer counts as a failure: whatever stopped
  // the request, the slot must come back.
  if (owner_) owner_->release(granted_, Clock::now() - granted_, false);
}

void AdaptiveLimit::Permit::done(Clock::duration latency, bool ok) {
  if (!owner_) return;
  auto* owner = std::exchange(owner_, nullptr);
  owner->release(granted_, latency, ok);
}

std::optional<AdaptiveLimit::Permit> AdaptiveLimit::acquire(Clock::time_point until) {
  if (Clock::now() >= until) return std::nullopt;
  std::unique_lock lock(mu_);
  if (waiting_.empty() && hasRoom()) {
    ++inFlight_;
    return Permit(this, Clock::now());
  }
  // In line, on a condition of its own: a freed slot wakes the front waiter
  // alone, not every waiter to find that one of them may go.
  Waiter me;
  waiting_.push_back(&me);
  auto next = [&] { return waiting_.front() == &me && hasRoom(); };
  bool got = true;
  while (!next()) {
    if (until == Clock::time_point::max()) {
      me.cv.wait(lock);
    } else if (me.cv.wait_until(lock, until) == std::cv_status::timeout) {
      got = next();
      break;
    }
    ++wakeups_;
  }
  const bool wasFront = waiting_.front() == &me;
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &me));
  if (got) ++inFlight_;
  // The next in line may have room too (the limit rose), or this one left the
  // front without taking the slot it was woken for.
  if (wasFront) wakeFront();
  if (!got) return std::nullopt;
  return Permit(this, Clock::now());
}

void AdaptiveLimit::wakeFront() {
  // Under mu_: a waiter that timed out leaves the line under it, so the one
  // notified is still there.
  if (!waiting_.empty() && hasRoom()) waiting_.front()->cv.notify_one();
}

void AdaptiveLimit::release(Clock::time_point granted, Clock::duration latency, bool ok) {
  std::lock_guard lock(mu_);
  --inFlight_;
  const bool slow = latency > options_.target;
  if (ok && !slow) {
    limit_ = std::min<double>(options_.max, limit_ + 1.0 / limit_);
    const double seconds = std::chrono::duration<double>(latency).count();
    typicalSeconds_ = typicalSeconds_ == 0 ? seconds : 0.8 * typicalSeconds_ + 0.2 * seconds;
  } else if (granted >= lastCut_) {
    // Requests that started before the last cut were sent at the old limit:
    // their slowness is already answered.
    limit_ = std::max<double>(options_.min, limit_ * options_.backoff);
    lastCut_ = Clock::now();
    ++cuts_;
  }
  wakeFront();
}

unsigned AdaptiveLimit::limit() const {
  std::lock_guard lock(mu_);
  return static_cast<unsigned>(limit_);
}

unsigned AdaptiveLimit::inFlight() const {
  std::lock_guard lock(mu_);
  return inFlight_;
}

AdaptiveLimit::Clock::duration AdaptiveLimit::typicalLatency() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(typicalSeconds_));
}

std::uint64_t AdaptiveLimit::wakeups() const {
  std::lock_guard lock(mu_);
  return wakeups_;
}

std::size_t AdaptiveLimit::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

std::uint64_t AdaptiveLimit::cuts() const {
  std::lock_guard lock(mu_);
  return cuts_;
}

}  // namespace tally::common
