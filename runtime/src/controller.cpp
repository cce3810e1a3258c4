#include "tally/runtime/controller.hpp"

#include <algorithm>

#include "tally/common/thread_name.hpp"
#include "tally/common/log.hpp"

namespace tally::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration<double>(now - t).count();
}

// client-go's workqueue histograms: 10ns .. 10s in powers of ten.
std::vector<double> queueBuckets() { return observability::exponentialBuckets(1e-8, 10, 10); }

}  // namespace

struct Controller::Metrics {
  observability::Counter& adds;
  observability::Counter& retries;
  observability::Gauge& depth;
  observability::Gauge& unfinished;
  observability::Gauge& longest;
  observability::Histogram& queueDuration;
  observability::Histogram& workDuration;
  observability::Counter& success;
  observability::Counter& error;
  observability::Counter& requeue;
  observability::Counter& requeueAfter;
  observability::Counter& errors;
  observability::Counter& terminal;

  Metrics(observability::Registry& r, const std::string& name)
      : adds(r.counter("workqueue_adds_total", "Total number of adds handled by workqueue", {"name"}).with({name})),
        retries(r.counter("workqueue_retries_total", "Total number of retries handled by workqueue", {"name"})
                    .with({name})),
        depth(r.gauge("workqueue_depth", "Current depth of workqueue", {"name"}).with({name})),
        unfinished(r.gauge("workqueue_unfinished_work_seconds",
                           "How many seconds of work has been done that is in progress and hasn't been observed by "
                           "work_duration",
                           {"name"})
                       .with({name})),
        longest(r.gauge("workqueue_longest_running_processor_seconds",
                        "How many seconds has the longest running processor for workqueue been running", {"name"})
                    .with({name})),
        queueDuration(r.histogram("workqueue_queue_duration_seconds",
                                  "How long in seconds an item stays in workqueue before being requested",
                                  queueBuckets(), {"name"})
                          .with({name})),
        workDuration(r.histogram("workqueue_work_duration_seconds", "How long in seconds processing an item takes",
                                 queueBuckets(), {"name"})
                         .with({name})),
        success(reconcileTotal(r).with({name, "success"})),
        error(reconcileTotal(r).with({name, "error"})),
        requeue(reconcileTotal(r).with({name, "requeue"})),
        requeueAfter(reconcileTotal(r).with({name, "requeue_after"})),
        errors(r.counter("controller_runtime_reconcile_errors_total",
                         "Total number of reconciliation errors per controller", {"controller"})
                   .with({name})),
        terminal(r.counter("controller_runtime_terminal_reconcile_errors_total",
                           "Total number of terminal reconciliation errors per controller", {"controller"})
                     .with({name})) {}

  static observability::Family<observability::Counter>& reconcileTotal(observability::Registry& r) {
    return r.counter("controller_runtime_reconcile_total", "Total number of reconciliations per controller",
                     {"controller", "result"});
  }
};

Controller::Controller(ControllerOptions options, Reconciler reconcile, observability::Registry* metrics)
    : options_(std::move(options)), reconcile_(std::move(reconcile)) {
  if (options_.workers < 1) options_.workers = 1;
  shared_->queue = std::make_shared<WorkQueue<std::string>>(options_.rateLimits);
  if (metrics) {
    metrics_ = std::make_shared<Metrics>(*metrics, options_.name);
    // Gauges that describe the present are computed when scraped.
    std::weak_ptr<Shared> weak = shared_;
    std::shared_ptr<Metrics> m = metrics_;
    metrics->onScrape([weak, m] {
      auto shared = weak.lock();
      if (!shared) return;
      const auto now = Clock::now();
      double unfinished = 0, longest = 0;
      std::size_t depth = 0;
      {
        std::lock_guard lock(shared->mu);
        for (const auto& [key, since] : shared->workingSince) {
          double s = secondsSince(since, now);
          unfinished += s;
          longest = std::max(longest, s);
        }
        depth = shared->queue->len();
      }
      m->unfinished.set(unfinished);
      m->longest.set(longest);
      m->depth.set(static_cast<double>(depth));
    });
  }
}

Controller::~Controller() { stop(); }

void Controller::enqueue(const std::string& key) {
  {
    std::lock_guard lock(shared_->mu);
    shared_->queuedSince.try_emplace(key, Clock::now());
  }
  if (metrics_) metrics_->adds.inc();
  queue()->add(key);
}

void Controller::enqueueAfter(const std::string& key, std::chrono::milliseconds delay) {
  if (metrics_) metrics_->adds.inc();
  queue()->addAfter(key, delay);
}

std::shared_ptr<WorkQueue<std::string>> Controller::queue() const {
  std::lock_guard lock(shared_->mu);
  return shared_->queue;
}

void Controller::enqueueOnStart(std::string key) {
  std::lock_guard lock(lifecycle_);
  seeders_.push_back([this, key = std::move(key)] { enqueue(key); });
}

void Controller::start() {
  std::lock_guard lock(lifecycle_);
  if (running_) return;
  std::shared_ptr<WorkQueue<std::string>> q;
  {
    std::lock_guard qlock(shared_->mu);
    if (shared_->queue->shuttingDown()) shared_->queue = std::make_shared<WorkQueue<std::string>>(options_.rateLimits);
    q = shared_->queue;
  }
  running_ = true;
  if (options_.onStart) options_.onStart();
  for (int i = 0; i < options_.workers; ++i) {
    workers_.emplace_back([this, q](std::stop_token st) { work(*q, st); });
    nameThread(workers_.back().native_handle(), "ctl-" + options_.name.substr(0, 8) + "-" + std::to_string(i));
  }
  for (const auto& seed : seeders_) seed();
}

void Controller::stop() {
  std::lock_guard lock(lifecycle_);
  if (!running_) return;
  for (auto& w : workers_) w.request_stop();
  queue()->shutDown();
  for (auto& w : workers_) w.join();
  workers_.clear();
  running_ = false;
}

void Controller::work(WorkQueue<std::string>& queue, std::stop_token stop) {
  while (auto key = queue.get()) {
    reconcileOne(queue, *key, stop);
    queue.done(*key);
  }
}

void Controller::reconcileOne(WorkQueue<std::string>& queue, const std::string& key, std::stop_token stop) {
  const auto started = Clock::now();
  {
    std::lock_guard lock(shared_->mu);
    auto queued = shared_->queuedSince.find(key);
    if (queued != shared_->queuedSince.end()) {
      if (metrics_) metrics_->queueDuration.observe(secondsSince(queued->second, started));
      shared_->queuedSince.erase(queued);
    }
    shared_->workingSince[key] = started;
  }
  Result<ReconcileResult> result = [&]() -> Result<ReconcileResult> {
    try {
      return reconcile_(key, stop);
    } catch (const std::exception& e) {
      // No exception crosses a worker: it is an error like any other.
      return Error{ErrorCode::kInternal, std::string("reconcile threw: ") + e.what()};
    }
  }();
  const auto finished = Clock::now();
  {
    std::lock_guard lock(shared_->mu);
    shared_->workingSince.erase(key);
  }
  reconciles_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_) metrics_->workDuration.observe(secondsSince(started, finished));
  if (!result) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    if (metrics_) {
      metrics_->error.inc();
      metrics_->errors.inc();
      metrics_->retries.inc();
    }
    logWarning("reconcile failed, retrying with backoff",
               {{"controller", options_.name}, {"key", key}, {"error", result.error().describe()}});
    if (!stop.stop_requested()) queue.addRateLimited(key);
    return;
  }
  switch (result->action) {
    case ReconcileResult::Action::kDone:
      if (metrics_) metrics_->success.inc();
      queue.forget(key);
      break;
    case ReconcileResult::Action::kRequeue:
      requeues_.fetch_add(1, std::memory_order_relaxed);
      if (metrics_) {
        metrics_->requeue.inc();
        metrics_->retries.inc();
      }
      queue.addRateLimited(key);
      break;
    case ReconcileResult::Action::kRequeueAfter:
      requeues_.fetch_add(1, std::memory_order_relaxed);
      if (metrics_) metrics_->requeueAfter.inc();
      queue.forget(key);
      queue.addAfter(key, result->after);
      break;
    case ReconcileResult::Action::kTerminal:
      // Retrying cannot help (the object is malformed, say): the key waits for
      // its next event instead of backing off forever.
      errors_.fetch_add(1, std::memory_order_relaxed);
      if (metrics_) {
        metrics_->error.inc();
        metrics_->errors.inc();
        metrics_->terminal.inc();
      }
      logWarning("reconcile failed for good, not retried until the object changes",
                 {{"controller", options_.name}, {"key", key}, {"error", result->why}});
      queue.forget(key);
      break;
  }
}

ControllerStats Controller::stats() const { return {reconciles_.load(), errors_.load(), requeues_.load()}; }

std::size_t Controller::queueLength() const { return queue()->len(); }

}  // namespace tally::runtime
