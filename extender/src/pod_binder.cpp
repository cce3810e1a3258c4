#include "tally/extender/pod_binder.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <thread>
#include <vector>

#include "tally/common/thread_name.hpp"
#include "tally/common/log.hpp"

namespace tally::extender {

// The pool's own threads (not asio::thread_pool's), so they are named as they
// start, like every other thread of the extender.
struct PodBinder::Impl {
  static common::AdaptiveLimit::Options capped(const Options& o) {
    auto l = o.postLimit;
    l.max = std::min(l.max, std::max(1u, o.threads));
    return l;
  }
  CacheWriter& writer;
  PostBinding post;
  Options options;
  // Binds by pod uid from their call to their answer. kube-scheduler binds a
  // pod again when it stopped waiting for the first bind (its httpTimeout)
  // and placed the pod anew: a second Binding POST would only meet the first
  // one's 409. A retry to the same node joins the bind in flight and gets its
  // answer; one to another node is refused at once (the first still decides).
  struct InFlight {
    std::string node;
    std::vector<Done> joined;
  };
  std::mutex inFlightMu;
  std::unordered_map<std::string, InFlight> inFlight;
  common::AdaptiveLimit posts;
  boost::asio::io_context pool;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keepRunning;
  std::vector<std::thread> threads;
  Impl(CacheWriter& w, PostBinding p, Options o)
      : writer(w), post(std::move(p)), options(o), posts(capped(o)), keepRunning(pool.get_executor()) {
    for (unsigned i = 0; i < std::max(1u, o.threads); ++i) {
      threads.emplace_back([this] { pool.run(); });
      nameThread(threads.back().native_handle(), "tally-bind");
    }
  }
};

PodBinder::PodBinder(CacheWriter& writer, PostBinding post, Options options)
    : impl_(std::make_unique<Impl>(writer, std::move(post), options)) {}

PodBinder::~PodBinder() { stop(); }

void PodBinder::stop() {
  // Binds in flight finish; then run() returns on every thread.
  impl_->keepRunning.reset();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

void PodBinder::bind(wire::BindingArgs args, Done done) {
  using Clock = std::chrono::steady_clock;
  const auto queued = Clock::now();
  if (!args.podUid.empty()) {
    std::lock_guard lock(impl_->inFlightMu);
    auto [it, first] = impl_->inFlight.try_emplace(args.podUid);
    if (!first) {
      if (it->second.node == args.node) {
        it->second.joined.push_back(std::move(done));
        return;
      }
      const std::string node = it->second.node;
      logWarning("bind refused: an earlier bind of the pod is in flight",
                 {{"pod", args.podNamespace + "/" + args.podName}, {"node", args.node}, {"inFlightTo", node}});
      return done("refused_in_flight",
                  "pod " + args.podNamespace + "/" + args.podName + " is being bound to " + node +
                      " by an earlier bind still in flight; not bound to " + args.node,
                  {});
    }
    it->second.node = args.node;
    // The answer of this bind goes to every retry that joined it.
    done = [impl = impl_.get(), uid = args.podUid, done = std::move(done)](std::string_view outcome, std::string error,
                                                                           Times times) {
      std::vector<Done> joined;
      {
        std::lock_guard held(impl->inFlightMu);
        auto entry = impl->inFlight.find(uid);
        if (entry != impl->inFlight.end()) {
          joined = std::move(entry->second.joined);
          impl->inFlight.erase(entry);
        }
      }
      for (auto& j : joined) j("joined", error, {});
      done(outcome, std::move(error), times);
    };
  }
  boost::asio::post(impl_->pool, [impl = impl_.get(), args = std::move(args), done = std::move(done), queued] {
    auto secondsSince = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    Times times;
    const auto started = Clock::now();
    const auto deadline = impl->options.queueDeadline;
    if (deadline.count() > 0 && started - queued > deadline) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(started - queued);
      logWarning("bind expired in the queue: not posted",
                 {{"pod", args.podNamespace + "/" + args.podName},
                  {"node", args.node},
                  {"waitedMs", static_cast<std::int64_t>(waited.count())},
                  {"deadlineMs", static_cast<std::int64_t>(deadline.count())}});
      return done("expired",
                  "bind of pod " + args.podNamespace + "/" + args.podName + " to " + args.node + " waited " +
                      std::to_string(waited.count()) + " ms for a bind thread, past the " +
                      std::to_string(deadline.count()) + " ms deadline; not posted, the pod is retried",
                  times);
    }
    auto outcome = impl->writer.assume(args.podNamespace, args.podName, args.podUid, args.node);
    bool assumed = false;
    AssumeOutcome result = AssumeOutcome::NotPublished;
    if (outcome.wait_for(impl->options.publishWait) == std::future_status::ready) {
      result = outcome.get();
      assumed = result == AssumeOutcome::Recorded;
    }
    times.assumeSeconds = secondsSince(started);
    if (result == AssumeOutcome::NoLongerFits) {
      logWarning("bind refused: the node no longer fits the pod",
                 {{"pod", args.podNamespace + "/" + args.podName}, {"node", args.node}});
      return done("refused_no_longer_fits",
                  "GPUs on node " + args.node + " were taken by another placement after filter; the pod is retried",
                  times);
    }
    if (!assumed) {
      // Binding a pod whose units nobody has counted yet would let the next
      // filter hand the same units out again: refuse, and the scheduler retries
      // once the pod watch has delivered it.
      if (!args.podUid.empty()) impl->writer.forget(args.podUid);
      logWarning("bind refused: the pod is not in the cache yet, placement cannot be held",
                 {{"pod", args.podNamespace + "/" + args.podName}, {"node", args.node}});
      return done("refused_unassumed",
                  "tally-extender has not seen pod " + args.podNamespace + "/" + args.podName +
                      " yet, so it cannot hold its GPUs on " + args.node + "; retry",
                  times);
    }
    // A slot for the POST, in arrival order. With a deadline, only while the
    // POST can still answer before kube-scheduler stops waiting.
    auto until = Clock::time_point::max();
    if (deadline.count() > 0) until = queued + deadline - impl->posts.typicalLatency();
    auto slot = impl->posts.acquire(until);
    if (!slot) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - queued);
      const unsigned limit = impl->posts.limit();
      if (!args.podUid.empty()) impl->writer.forget(args.podUid);
      logWarning("bind expired waiting for a Binding slot: not posted",
                 {{"pod", args.podNamespace + "/" + args.podName},
                  {"node", args.node},
                  {"waitedMs", static_cast<std::int64_t>(waited.count())},
                  {"postLimit", static_cast<std::int64_t>(limit)}});
      return done("expired",
                  "bind of pod " + args.podNamespace + "/" + args.podName + " to " + args.node + " waited " +
                      std::to_string(waited.count()) + " ms for one of " + std::to_string(limit) +
                      " Binding slots (the API server is answering slowly) and could not be answered within the " +
                      std::to_string(deadline.count()) + " ms deadline; not posted, the pod is retried",
                  times);
    }
    std::string error;
    const auto posted = Clock::now();
    bool answered = true;
    try {
      error = impl->post(args);
    } catch (const std::exception& e) {
      error = e.what();
      answered = false;
    }
    slot->done(Clock::now() - posted, answered);
    times.postSeconds = secondsSince(posted);
    if (!error.empty()) {
      if (!args.podUid.empty()) impl->writer.forget(args.podUid);
      logWarning("bind failed",
                 {{"pod", args.podNamespace + "/" + args.podName}, {"node", args.node}, {"error", error}});
      return done("failed", std::move(error), times);
    }
    done("bound", "", times);
  });
}

unsigned PodBinder::postLimit() const { return impl_->posts.limit(); }
unsigned PodBinder::postsInFlight() const { return impl_->posts.inFlight(); }

}  // namespace tally::extender
