// The controller loop without an API server: results, backoff, one worker per
// key, new terms, metrics with client-go's names; and the manager's stages
// (start in one order, stop in the reverse one, the caches waited for).

#include "tally/runtime/controller.hpp"

#include "tally/runtime/manager.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace tally::runtime {
namespace {

using namespace std::chrono_literals;

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return f();
}

ControllerOptions options(std::string name, int workers = 1) {
  ControllerOptions o;
  o.name = std::move(name);
  o.workers = workers;
  o.rateLimits.itemBase = 1ms;
  o.rateLimits.itemMax = 20ms;
  o.rateLimits.qps = 10'000;
  o.rateLimits.burst = 10'000;
  return o;
}

TEST(Controller, DoneReconcilesAKeyOnceHoweverOftenItWasQueued) {
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  Controller c(options("once"), [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
    while (!release) std::this_thread::sleep_for(1ms);
    ++calls;
    return ReconcileResult::done();
  });
  // Queued five times before any worker runs: the queue holds it once.
  for (int i = 0; i < 5; ++i) c.enqueue("ns/a");
  c.start();
  release = true;
  ASSERT_TRUE(eventually([&] { return calls.load() >= 1 && c.queueLength() == 0; }));
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(c.stats().reconciles, 1u);
}

TEST(Controller, ErrorsAndRequeuesRetryWithBackoffUntilDone) {
  std::atomic<int> calls{0};
  Controller c(options("retry"), [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
    int n = ++calls;
    if (n == 1) return Error{ErrorCode::kConflict, "409: the object has been modified"};
    if (n == 2) return ReconcileResult::requeue();
    return ReconcileResult::done();
  });
  c.start();
  c.enqueue("ns/a");
  ASSERT_TRUE(eventually([&] { return calls.load() == 3; }));
  std::this_thread::sleep_for(40ms);
  EXPECT_EQ(calls.load(), 3) << "done() forgets the key: nothing more";
  auto stats = c.stats();
  EXPECT_EQ(stats.errors, 1u);
  EXPECT_EQ(stats.requeues, 1u);
}

TEST(Controller, RequeueAfterComesBackAfterTheDelay) {
  std::atomic<int> calls{0};
  std::chrono::steady_clock::time_point first, second;
  Controller c(options("after"), [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
    int n = ++calls;
    if (n == 1) {
      first = std::chrono::steady_clock::now();
      return ReconcileResult::requeueAfter(50ms);
    }
    second = std::chrono::steady_clock::now();
    return ReconcileResult::done();
  });
  c.start();
  c.enqueue("a");
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  EXPECT_GE(second - first, 45ms);
}

TEST(Controller, AKeyIsNeverReconciledByTwoWorkersAtOnce) {
  std::mutex mu;
  std::set<std::string> busy;
  std::atomic<int> overlaps{0}, calls{0};
  Controller c(options("exclusive", 4), [&](const std::string& key, std::stop_token) -> Result<ReconcileResult> {
    {
      std::lock_guard lock(mu);
      if (!busy.insert(key).second) ++overlaps;
    }
    std::this_thread::sleep_for(100us);
    {
      std::lock_guard lock(mu);
      busy.erase(key);
    }
    ++calls;
    return ReconcileResult::done();
  });
  c.start();
  std::vector<std::jthread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&c, t] {
      for (int i = 0; i < 500; ++i) c.enqueue("ns/key-" + std::to_string((i + t) % 7));
    });
  }
  producers.clear();
  ASSERT_TRUE(eventually([&] { return c.queueLength() == 0; }));
  c.stop();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GE(calls.load(), 7);
}

TEST(Controller, ExceptionIsAnErrorNotACrash) {
  std::atomic<int> calls{0};
  Controller c(options("throws"), [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
    if (++calls == 1) throw std::runtime_error("boom");
    return ReconcileResult::done();
  });
  c.start();
  c.enqueue("a");
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  EXPECT_EQ(c.stats().errors, 1u);
}

TEST(Controller, StopLetsTheRunningReconcileFinishAndANewTermStartsAgain) {
  std::atomic<bool> inside{false}, finished{false};
  std::atomic<int> calls{0};
  Controller c(options("terms"), [&](const std::string&, std::stop_token stop) -> Result<ReconcileResult> {
    ++calls;
    inside = true;
    while (!stop.stop_requested()) std::this_thread::sleep_for(1ms);
    finished = true;
    return ReconcileResult::done();
  });
  c.start();
  c.enqueue("a");
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  c.stop();
  EXPECT_TRUE(finished.load()) << "stop() returned before the reconcile did";
  EXPECT_FALSE(c.running());
  inside = false;
  c.start();
  c.enqueue("b");
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  c.stop();
  EXPECT_EQ(calls.load(), 2);
}

// The certificate keeper's leader controller: its Secret may not exist yet, so
// no informer seeds a new leadership term; the key given to enqueueOnStart does.
TEST(Controller, AKeyEnqueuedOnStartIsReconciledInEveryTermWithoutAnyObject) {
  std::mutex mu;
  std::map<std::string, int> calls;
  Controller c(options("seeded"), [&](const std::string& key, std::stop_token) -> Result<ReconcileResult> {
    std::lock_guard lock(mu);
    ++calls[key];
    return ReconcileResult::done();
  });
  c.enqueueOnStart("ns/secret");
  auto count = [&] {
    std::lock_guard lock(mu);
    return calls["ns/secret"];
  };
  c.start();
  ASSERT_TRUE(eventually([&] { return count() == 1; }));
  c.stop();
  c.start();
  ASSERT_TRUE(eventually([&] { return count() == 2; })) << "the second term was not seeded";
  c.stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(calls.size(), 1u);
}

TEST(Controller, OnStartRunsBeforeAnyReconcileOfTheTerm) {
  std::atomic<int> term{0};
  std::mutex mu;
  std::vector<int> seenTerms;
  ControllerOptions o = options("termed", 2);
  Controller* self = nullptr;
  o.onStart = [&] {
    // A key queued in the hook is reconciled in this term, after the hook.
    std::this_thread::sleep_for(20ms);
    term.fetch_add(1);
    self->enqueue("k");
  };
  Controller c(o, [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
    std::lock_guard lock(mu);
    seenTerms.push_back(term.load());
    return ReconcileResult::done();
  });
  self = &c;
  c.enqueue("before-start");
  c.start();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return seenTerms.size() == 2;
  }));
  c.stop();
  c.start();
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return seenTerms.size() == 3;
  }));
  c.stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(seenTerms, (std::vector<int>{1, 1, 2}));
}

TEST(Controller, MetricsCarryClientGoWorkqueueNames) {
  observability::Registry registry;
  std::atomic<int> calls{0};
  Controller c(
      options("quota"),
      [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
        if (++calls == 1) return Error{ErrorCode::kServerError, "500"};
        return ReconcileResult::done();
      },
      &registry);
  c.start();
  c.enqueue("org/acme");
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  c.stop();
  const std::string text = registry.render();
  for (const char* line :
       {"workqueue_adds_total{name=\"quota\"} 1", "workqueue_retries_total{name=\"quota\"} 1",
        "workqueue_depth{name=\"quota\"} 0", "workqueue_work_duration_seconds_count{name=\"quota\"} 2",
        "workqueue_queue_duration_seconds_count{name=\"quota\"} 1",
        "workqueue_unfinished_work_seconds{name=\"quota\"} 0",
        "controller_runtime_reconcile_total{controller=\"quota\",result=\"success\"} 1",
        "controller_runtime_reconcile_total{controller=\"quota\",result=\"error\"} 1",
        "controller_runtime_reconcile_errors_total{controller=\"quota\"} 1"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(Controller, ScrapeAfterTheControllerIsGoneReadsNothingFreed) {
  observability::Registry registry;
  {
    Controller c(
        options("gone"),
        [](const std::string&, std::stop_token) -> Result<ReconcileResult> { return ReconcileResult::done(); },
        &registry);
    c.start();
    c.enqueue("a");
  }
  EXPECT_NE(registry.render().find("workqueue_adds_total{name=\"gone\"} 1"), std::string::npos);
}

TEST(Controller, TerminalIsCountedAndNotRetriedUntilTheKeyComesAgain) {
  std::atomic<int> calls{0};
  observability::Registry registry;
  Controller c(
      options("terminal"),
      [&](const std::string&, std::stop_token) -> Result<ReconcileResult> {
        ++calls;
        return ReconcileResult::terminal("the object cannot be decoded");
      },
      &registry);
  c.start();
  c.enqueue("ns/a");
  ASSERT_TRUE(eventually([&] { return calls.load() == 1 && c.queueLength() == 0; }));
  std::this_thread::sleep_for(50ms);  // a retry with backoff (1-20 ms) would have come by now
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(c.stats().errors, 1u);
  const std::string text = registry.render();
  EXPECT_NE(text.find(R"(controller_runtime_terminal_reconcile_errors_total{controller="terminal"} 1)"),
            std::string::npos)
      << text;
  c.enqueue("ns/a");  // its next event
  ASSERT_TRUE(eventually([&] { return calls.load() == 2; }));
  c.stop();
}

// Records every start and stop of the runnables it makes, in order.
struct Journal {
  std::mutex mu;
  std::vector<std::string> entries;
  void note(std::string entry) {
    std::lock_guard lock(mu);
    entries.push_back(std::move(entry));
  }
  std::vector<std::string> read() {
    std::lock_guard lock(mu);
    return entries;
  }
  std::unique_ptr<Runnable> make(const std::string& name, std::function<bool()> ready = nullptr) {
    return runnable(
        name, [this, name] { note("start " + name); }, [this, name] { note("stop " + name); }, std::move(ready));
  }
};

TEST(Manager, StartsByStageWaitsForTheCachesAndStopsInTheReverseOrder) {
  Journal journal;
  std::atomic<bool> cacheReady{false};
  Manager manager(nullptr, ManagerOptions{});  // no informer, no election: it leads alone
  // Added out of stage order on purpose: the stage decides, then the order added.
  manager.add(Stage::Replica, journal.make("webhooks"));
  manager.add(Stage::Leader, journal.make("binder"));
  manager.add(Stage::Caches, journal.make("writer"));
  manager.add(Stage::Caches, journal.make("informers", [&] { return cacheReady.load(); }));
  manager.add(Stage::Serving, journal.make("ops"));
  std::stop_source stop;
  std::jthread running([&] { EXPECT_TRUE(manager.run(stop.get_token())); });
  ASSERT_TRUE(eventually([&] { return journal.read().size() == 3; }));
  std::this_thread::sleep_for(30ms);
  // Nothing past the caches starts while one is not ready.
  EXPECT_EQ(journal.read(), (std::vector<std::string>{"start ops", "start writer", "start informers"}));
  EXPECT_EQ(manager.unsynced(), std::vector<std::string>{"informers"});
  EXPECT_FALSE(manager.synced());
  cacheReady = true;
  ASSERT_TRUE(eventually([&] { return journal.read().size() == 5; }));
  EXPECT_TRUE(manager.synced());
  EXPECT_TRUE(manager.leading());
  stop.request_stop();
  running.join();
  // The leader's work stops while the replica still serves its webhooks (a
  // reconcile's write may pass through one of them), then the rest in reverse.
  EXPECT_EQ(journal.read(),
            (std::vector<std::string>{"start ops", "start writer", "start informers", "start binder", "start webhooks",
                                      "stop binder", "stop webhooks", "stop informers", "stop writer", "stop ops"}));
}

TEST(Manager, ACacheThatNeverSyncsFailsTheStartNamingItAndStopsWhatStarted) {
  Journal journal;
  ManagerOptions o;
  o.cacheSyncTimeout = 50ms;
  Manager manager(nullptr, o);
  manager.add(Stage::Serving, journal.make("ops"));
  manager.add(Stage::Caches, journal.make("state", [] { return false; }));
  manager.add(Stage::Leader, journal.make("binder"));
  std::stop_source stop;
  const Status ran = manager.run(stop.get_token());
  ASSERT_FALSE(ran);
  EXPECT_TRUE(ran.error().is(ErrorCode::kTimeout));
  EXPECT_NE(ran.error().message.find("state"), std::string::npos) << ran.error().message;
  EXPECT_EQ(journal.read(), (std::vector<std::string>{"start ops", "start state", "stop state", "stop ops"}));
}

}  // namespace
}  // namespace tally::runtime
