#include "tally/runtime/manager.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <thread>

#include "tally/common/thread_name.hpp"
#include "tally/common/log.hpp"

namespace tally::runtime {

using namespace std::chrono_literals;

namespace {

std::int64_t millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

// Runs one step of the shutdown; one that takes longer than a second is
// named in the log, so a slow stop says which part held it.
template <typename F>
void timedStop(const std::string& what, F&& stop) {
  const auto start = std::chrono::steady_clock::now();
  stop();
  const std::int64_t took = millisecondsSince(start);
  if (took >= 1000) logWarning("slow shutdown step", {{"step", what}, {"ms", took}});
}

class FunctionRunnable final : public Runnable {
 public:
  FunctionRunnable(std::string name, std::function<void()> start, std::function<void()> stop,
                   std::function<bool()> ready)
      : name_(std::move(name)), start_(std::move(start)), stop_(std::move(stop)), ready_(std::move(ready)) {}
  std::string name() const override { return name_; }
  void start() override {
    if (start_) start_();
  }
  void stop() override {
    if (stop_) stop_();
  }
  bool ready() const override { return !ready_ || ready_(); }

 private:
  std::string name_;
  std::function<void()> start_, stop_;
  std::function<bool()> ready_;
};

}  // namespace

std::unique_ptr<Runnable> runnable(std::string name, std::function<void()> start, std::function<void()> stop,
                                   std::function<bool()> ready) {
  return std::make_unique<FunctionRunnable>(std::move(name), std::move(start), std::move(stop), std::move(ready));
}

Manager::Manager(std::shared_ptr<Client> client, ManagerOptions options)
    : client_(std::move(client)), options_(std::move(options)) {}

Manager::~Manager() {
  if (scrape_) {
    std::lock_guard lock(scrape_->mu);
    scrape_->alive = false;
  }
  for (auto& c : controllers_) c->stop();
  if (elector_) elector_->stop();
  for (auto it = started_.rbegin(); it != started_.rend(); ++it) (*it)->stop();
  for (auto& i : informers_) i->stop();
}

Controller& Manager::controller(ControllerOptions options, Reconciler reconcile) {
  controllers_.push_back(std::make_unique<Controller>(std::move(options), std::move(reconcile), options_.metrics));
  return *controllers_.back();
}

void Manager::add(Stage stage, std::unique_ptr<Runnable> runnable) {
  Runnable& ref = *runnable;
  owned_.push_back(std::move(runnable));
  add(stage, ref);
}

void Manager::add(Stage stage, Runnable& runnable) { runnables_.emplace_back(stage, &runnable); }

std::vector<Runnable*> Manager::stage(Stage wanted) const {
  std::vector<Runnable*> out;
  for (const auto& [stage, r] : runnables_) {
    if (stage == wanted) out.push_back(r);
  }
  return out;
}

std::vector<std::string> Manager::unsynced() const {
  std::vector<std::string> out;
  for (const auto& i : informers_) {
    if (!i->ready()) out.push_back(i->name());
  }
  for (const Runnable* r : stage(Stage::Caches)) {
    if (!r->ready()) out.push_back(r->name());
  }
  return out;
}

void Manager::registerMetrics() {
  if (!options_.metrics) return;
  auto& r = *options_.metrics;
  if (options_.leaderElection) {
    leaderGauge_ = &r.gauge("leader_election_master_status",
                            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
                            "indicates master. 'name' is the string used to identify the lease.",
                            {"name"})
                        .with({options_.leaderElection->leaseName});
  }
  auto& synced = r.gauge("tally_informer_synced", "1 once the informer's cache has synced", {"resource"});
  auto& events = r.counter("tally_informer_events_total", "Watch events the informer applied", {"resource"});
  auto& stale = r.gauge("tally_informer_staleness_seconds", "Seconds since the informer last heard from the server",
                        {"resource"});
  scrape_ = std::make_shared<ScrapeState>();
  for (auto& i : informers_) {
    scrape_->series.push_back(
        {i.get(), &synced.with({i->name()}), &events.with({i->name()}), &stale.with({i->name()}), 0});
  }
  // Copies of this function run at each scrape; they share one state, which
  // the manager's destructor marks dead so a later scrape reads nothing freed.
  r.onScrape([state = scrape_] {
    std::lock_guard lock(state->mu);
    if (!state->alive) return;
    for (auto& s : state->series) {
      s.synced->set(s.informer->ready() ? 1 : 0);
      std::uint64_t seen = s.informer->events();
      if (seen > s.counted) s.events->inc(seen - s.counted);
      s.counted = seen;
      auto age = s.informer->staleness();
      s.stale->set(age == std::chrono::milliseconds::max() ? -1 : std::chrono::duration<double>(age).count());
    }
  });
}

void Manager::startLeaderControllers() {
  std::lock_guard lock(leaderMu_);
  leading_ = true;
  if (leaderGauge_) leaderGauge_->set(1);
  for (auto& c : controllers_) {
    if (c->leaderOnly()) c->start();
  }
  for (Runnable* r : stage(Stage::Leader)) r->start();
  logInfo("leading: started the leader-only controllers");
}

void Manager::stopLeaderControllers() {
  std::lock_guard lock(leaderMu_);
  if (leading_) {
    auto leader = stage(Stage::Leader);
    for (auto it = leader.rbegin(); it != leader.rend(); ++it) (*it)->stop();
  }
  for (auto& c : controllers_) {
    if (c->leaderOnly()) c->stop();
  }
  if (leading_) logInfo("not leading: stopped the leader-only controllers");
  leading_ = false;
  if (leaderGauge_) leaderGauge_->set(0);
}

void Manager::stopStage(Stage wanted) {
  const auto all = stage(wanted);
  for (std::size_t i = started_.size(); i-- > 0;) {
    if (std::find(all.begin(), all.end(), started_[i]) == all.end()) continue;
    timedStop(started_[i]->name(), [&] { started_[i]->stop(); });
    started_.erase(started_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

Status Manager::waitForCaches(std::stop_token stop) {
  for (auto& i : informers_) i->start();
  for (Runnable* r : stage(Stage::Caches)) {
    r->start();
    started_.push_back(r);
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.cacheSyncTimeout;
  std::mutex mu;
  std::condition_variable_any cv;
  while (!unsynced().empty()) {
    if (stop.stop_requested()) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const auto& n : unsynced()) names += (names.empty() ? "" : ", ") + n;
      return Error{ErrorCode::kTimeout,
                   "caches did not sync within " + std::to_string(options_.cacheSyncTimeout.count()) + "ms: " + names};
    }
    std::unique_lock lock(mu);
    cv.wait_for(lock, stop, 10ms, [] { return false; });
  }
  return {};
}

Status Manager::run(std::stop_token stop) {
  registerMetrics();
  for (Runnable* r : stage(Stage::Serving)) {
    r->start();
    started_.push_back(r);
  }
  Status result = waitForCaches(stop);
  if (result && !stop.stop_requested()) {
    synced_ = true;
    if (options_.leaderElection) {
      LeaderElectionConfig cfg = *options_.leaderElection;
      auto started = cfg.onStartedLeading;
      auto stopped = cfg.onStoppedLeading;
      cfg.onStartedLeading = [this, started](std::stop_token term) {
        startLeaderControllers();
        if (started) started(term);
        std::mutex m;
        std::condition_variable_any wait;
        std::unique_lock lock(m);
        wait.wait(lock, term, [] { return false; });
        stopLeaderControllers();
      };
      cfg.onStoppedLeading = [this, stopped] {
        stopLeaderControllers();
        if (stopped) stopped();
      };
      elector_ = std::make_unique<LeaderElector>(client_, std::move(cfg));
      elector_->start();
    } else {
      startLeaderControllers();
    }
    for (auto& c : controllers_) {
      if (!c->leaderOnly()) c->start();
    }
    for (Runnable* r : stage(Stage::Replica)) {
      r->start();
      started_.push_back(r);
    }
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait(lock, stop, [] { return false; });
  }
  // Shut down in the reverse order: no reconcile runs once the Lease is
  // released, and no cache stops under running work. The controllers stop
  // before the replica's own listeners: a reconcile's write can pass through
  // a webhook this replica serves, and with the listener gone first the API
  // server waited out its webhook timeout (10 s) on it.
  const auto stopping = std::chrono::steady_clock::now();
  timedStop("controllers", [this] {
    for (auto& c : controllers_) {
      if (!c->leaderOnly()) c->stop();
    }
  });
  timedStop("leader-only controllers", [this] { stopLeaderControllers(); });
  stopStage(Stage::Replica);
  timedStop("leader election", [this] {
    if (elector_) elector_->stop();
  });
  stopStage(Stage::Caches);
  timedStop("informers", [this] {
    for (auto& i : informers_) i->stop();
  });
  stopStage(Stage::Serving);
  synced_ = false;
  logInfo("manager stopped", {{"ms", millisecondsSince(stopping)}});
  return result;
}

SignalStop::SignalStop() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  waiter_ = std::jthread([this, set](std::stop_token st) {
    const timespec tick{0, 200'000'000};
    while (!st.stop_requested()) {
      int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig > 0) {
        received_ = sig;
        source_.request_stop();
        return;
      }
    }
  });
  nameThread(waiter_.native_handle(), "tally-signals");
}

SignalStop::~SignalStop() = default;

void SignalStop::wait() const {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait(lock, source_.get_token(), [] { return false; });
}

}  // namespace tally::runtime
