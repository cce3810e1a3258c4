// GET /usage on the ops server as the binary serves it (run under TSan): one
// ops thread, the route's review and answer on a pool of their own. While
// callers' reviews hang (an API server that does not answer), the ops thread
// still answers the probes; callers get 401 without a token and 403 without
// the grant, and the recorder is never asked for their data.

#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "tally/controller/usage_recorder.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/state/writer.hpp"
#include "tally/runtime/http/testing/client.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;
namespace http = tally::runtime::http;

// "slow" waits until released, then is refused; "reader" is not granted.
struct HangingReviewer final : AccessReviewer {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int waiting = 0;
  Access review(std::string_view token, std::string_view) override {
    if (token == "slow") {
      std::unique_lock lock(mu);
      ++waiting;
      cv.notify_all();
      cv.wait(lock, [&] { return released; });
      return {Access::Verdict::Forbidden, "slow", "user slow may not get /usage"};
    }
    if (token == "reader") return {Access::Verdict::Forbidden, "reader", "user reader may not get /usage"};
    return {Access::Verdict::Unauthenticated, "", "the bearer token is not valid"};
  }
  void release() {
    std::lock_guard lock(mu);
    released = true;
    cv.notify_all();
  }
  bool awaitWaiting(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 30s, [&] { return waiting >= n; });
  }
};

TEST(UsageRoute, TheProbesAnswerWhileUsageReviewsHangAndNoCallerWithoutAGrantReadsUsage) {
  state::Writer writer({});
  writer.start();
  writer.flush();
  UsageRecorder recorder(nullptr, writer, {});
  HangingReviewer reviewer;
  boost::asio::thread_pool pool(1);  // as the binary: one review at a time, off the ops thread

  http::Router ops;
  http::addOperationRoutes(ops, {});
  addUsageRoute(ops, recorder, writer.snapshots(),
                {&reviewer, [&pool](std::function<void()> work) { boost::asio::post(pool, std::move(work)); }});
  http::ServerOptions so;
  so.threads = 1;
  http::Server server(so, std::move(ops));
  server.start();

  constexpr int kStuck = 20;
  std::vector<std::future<int>> stuck;
  for (int i = 0; i < kStuck; ++i) {
    stuck.push_back(std::async(std::launch::async, [port = server.port()] {
      http::testing::TestClient c(port);
      return c.send("GET", "/usage?since=2026-01-01T00:00:00Z", "", {{"Authorization", "Bearer slow"}}).status;
    }));
  }
  ASSERT_TRUE(reviewer.awaitWaiting(1)) << "no review started";

  // The ops thread is free: the probes answer while every review waits.
  auto probe = std::async(std::launch::async, [port = server.port()] {
    return http::testing::TestClient(port).send("GET", "/healthz").status;
  });
  const bool answered = probe.wait_for(30s) == std::future_status::ready;
  if (!answered) reviewer.release();
  ASSERT_TRUE(answered) << "/healthz did not answer while /usage reviews hang";
  EXPECT_EQ(probe.get(), 200);
  EXPECT_EQ(http::testing::TestClient(server.port()).send("GET", "/readyz").status, 200);

  reviewer.release();
  for (auto& f : stuck) EXPECT_EQ(f.get(), 403);

  http::testing::TestClient c(server.port());
  auto r = c.send("GET", "/usage?since=2026-01-01T00:00:00Z");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(r.body.find("get /usage"), std::string::npos) << r.body;
  EXPECT_EQ(c.send("GET", "/usage?since=2026-01-01T00:00:00Z", "", {{"Authorization", "Bearer forged"}}).status, 401);
  r = c.send("GET", "/usage?since=2026-01-01T00:00:00Z", "", {{"Authorization", "Bearer reader"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("user reader may not get /usage"), std::string::npos) << r.body;
  server.stop();
  pool.join();
  writer.stop();
}

}  // namespace
}  // namespace tally::controller
