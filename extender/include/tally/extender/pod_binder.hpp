#pragma once
// The bind verb: record the placement as assumed (so the next filter already
// counts its units), POST the Binding, and forget the assumption when the POST
// fails. The watch confirming the pod bound drops it too, and a TTL bounds a
// lost one. Runs on its own small pool so a slow API server never holds the
// threads that answer filter.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tally/common/adaptive_limit.hpp"
#include "tally/extender/assumptions.hpp"
#include "tally/extender/wire.hpp"

namespace tally::extender {

class PodBinder {
 public:
  // Posts a v1 Binding; returns an error text, empty on success.
  using PostBinding = std::function<std::string(const wire::BindingArgs&)>;
  // Where a bind's time went: waiting for its assumption to be published, and
  // the Binding POST (0 when it never ran).
  struct Times {
    double assumeSeconds = 0;
    double postSeconds = 0;
  };
  // Called with the outcome label ("bound", "refused_unassumed", "refused_no_longer_fits", "expired", "failed";
  // for a retry of a bind still in flight, "joined" with that bind's error text, or "refused_in_flight" when it
  // asks another node), the error text and the times.
  using Done = std::function<void(std::string_view outcome, std::string error, Times times)>;

  struct Options {
    unsigned threads = 64;
    std::chrono::milliseconds publishWait{1000};  // longest wait for the assumption to be visible
    // A bind that waited longer than this for a thread is answered "expired"
    // without assuming or posting anything: kube-scheduler has stopped waiting
    // for it (its extender httpTimeout) and schedules the pod again, so posting
    // late would bind a pod the scheduler is placing anew, and a backlog would
    // grow on itself. 0: no limit.
    std::chrono::milliseconds queueDeadline{0};
    // How many Binding POSTs run at once: at most `threads`, and fewer while
    // the API server answers slower than postLimit.target (see
    // common::AdaptiveLimit). A bind waits for a slot in arrival order; with a
    // queueDeadline it waits only while the POST can still be answered before
    // the deadline (waited + the typical POST time), and is otherwise answered
    // "expired" without posting. postLimit.max is capped at threads.
    common::AdaptiveLimit::Options postLimit{};
  };

  PodBinder(CacheWriter& writer, PostBinding post, Options options);
  ~PodBinder();
  PodBinder(const PodBinder&) = delete;
  PodBinder& operator=(const PodBinder&) = delete;

  void bind(wire::BindingArgs args, Done done);
  // The Binding POSTs allowed at once now, and running now.
  unsigned postLimit() const;
  unsigned postsInFlight() const;
  // Waits for binds in flight and stops the pool.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally::extender
