// GET /options under concurrency (run under TSan): the route's handler on a
// pool of threads, as in the binary, with the decision cache shared by all of
// them, while the writer publishes snapshots and the cache's entries expire.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <thread>

#include "tally/controller/catalog_endpoint.hpp"
#include "tally/model/testing/fixtures.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;

// "ok" may order in t; anything else is no valid token. Counts its calls.
struct CountingReviewer final : AccessReviewer {
  std::atomic<int> calls{0};
  Access review(std::string_view token, std::string_view ns) override {
    calls.fetch_add(1);
    if (token != "ok") return {Access::Verdict::Unauthenticated, "", "the bearer token is not valid"};
    if (ns != "t")
      return {Access::Verdict::Forbidden, "u", "user u may not create gpudevices.gpu.tally.dev in " + std::string(ns)};
    return {Access::Verdict::Allowed, "u", ""};
  }
};

TEST(CatalogEndpointConcurrency, RequestsOnAPoolWhileTheWriterPublishes) {
  state::Writer::Options wo;
  wo.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  wo.publishInterval = 1ms;
  state::Writer writer(wo);
  writer.upsert(model::testing::ns("t"));
  writer.upsert(model::testing::passthroughClass());
  writer.start();
  writer.flush();

  CountingReviewer backend;
  CachedAccessReviewer cached(backend, 5ms);
  observability::Registry registry;
  boost::asio::thread_pool pool(4);
  auto handler = catalogEndpoint(writer.snapshots(), cached,
                                 {[&pool](std::function<void()> work) { boost::asio::post(pool, std::move(work)); },
                                  &catalogRequestMetric(registry)});

  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    for (int i = 0; !stop.load(); ++i) {
      writer.upsert(model::testing::gpuNode("n" + std::to_string(i % 16), model::NodeMode::VmPassthrough,
                                            model::testing::kH200, 1 + i % 8));
      std::this_thread::sleep_for(200us);
    }
  });
  std::atomic<int> ok{0}, forbidden{0}, unauthorized{0}, other{0};
  constexpr int kRequests = 2000;
  std::atomic<int> done{0};
  for (int i = 0; i < kRequests; ++i) {
    const std::string target = i % 3 == 1 ? "/options?namespace=other" : "/options?namespace=t";
    runtime::http::Request request("GET", target);
    // A hand-built request has no headers: the token goes through answerOptions
    // for one in four; the rest take the route (and are refused 401).
    if (i % 4 == 0) {
      boost::asio::post(pool, [&, target] {
        auto r = answerOptions(writer.snapshots(), cached, target.substr(target.find('=') + 1), "Bearer ok");
        (r.status == 200 ? ok : r.status == 403 ? forbidden : other).fetch_add(1);
        done.fetch_add(1);
      });
    } else {
      handler(request, [&](runtime::http::Response r) {
        (r.status == 401 ? unauthorized : other).fetch_add(1);
        done.fetch_add(1);
      });
    }
  }
  for (int i = 0; i < 2000 && done.load() < kRequests; ++i) std::this_thread::sleep_for(5ms);
  stop = true;
  publisher.join();
  pool.join();
  writer.stop();
  EXPECT_EQ(done.load(), kRequests);
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(forbidden.load(), 0);
  EXPECT_EQ(unauthorized.load(), kRequests - kRequests / 4);
  // The cache answered most reviews; expiry sent some back to the backend.
  EXPECT_LT(backend.calls.load(), kRequests / 4);
  EXPECT_GE(backend.calls.load(), 2);
  EXPECT_NE(registry.render().find("tally_controller_catalog_requests_total{code=\"401\"}"), std::string::npos);
}

}  // namespace
}  // namespace tally::controller
