#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <cstdio>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/runtime/http/testing/client.hpp"
#include "tally/extender/pod_binder.hpp"
#include "tally/extender/service.hpp"
#include "tally/extender/verbs.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;
using namespace tally::model::testing;
using tally::runtime::http::testing::TestClient;

TEST(Extender, FiltersOverHttpStayConsistentWhileTheWriterChurns) {
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  o.publishInterval = std::chrono::milliseconds(1);
  auto writer = loadedWriter(syntheticCluster(50, 200, 5), o);
  writer->start();
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  ExtenderService service(writer->snapshots(), metrics, ServiceOptions{}, nullptr);
  http::Router router;
  service.addVerbRoutes(router);
  service.addOperationRoutes(router);
  http::ServerOptions ho = serverOptions();
  ho.threads = 4;
  http::Server server(ho, std::move(router), service.observer());
  server.start();

  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int i = 0; !done.load(); ++i) {
      std::string node = "node-" + std::to_string(i % 50);
      writer->upsert(gpuPod("tenant-1", "churn-" + std::to_string(i % 100), kH200, 1 + i % 3, i % 2 ? node : ""));
      if (i % 7 == 0) writer->remove(model::Kind::Pod, "tenant-1", "churn-" + std::to_string((i + 50) % 100));
      if (i % 11 == 0) writer->upsert(gpuNode(node, model::NodeMode::VmPassthrough, kH200, 8 + i % 2));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::string> names;
  for (int i = 0; i < 50; ++i) names.push_back("node-" + std::to_string(i));
  std::string body = extenderArgs(podJson("tenant-2", "p", "uid-p", 1), names);
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&] {
      TestClient c(server.port());
      for (int i = 0; i < 150; ++i) {
        auto r = c.send(i % 3 == 2 ? "POST" : "POST", i % 3 == 2 ? "/tally/prioritize" : "/tally/filter", body);
        bool good = r.status == 200 &&
                    (i % 3 == 2 ? r.body.front() == '[' : r.body.find("\"Error\":\"\"") != std::string::npos);
        (good ? ok : bad)++;
      }
    });
  }
  for (auto& c : clients) c.join();
  done = true;
  churn.join();
  server.stop();
  writer->stop();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ok.load(), 6 * 150);
  EXPECT_GT(writer->stats().publishes, 10u);
}

// Concurrent requests listing the same nodes in different orders all rewrite
// the name lookup's remembered successors: a guess may be any row, and every
// answer must still be the one its own list gets alone.
TEST(Extender, ConcurrentFiltersInDifferentOrdersGetTheirOwnAnswers) {
  auto writer = loadedWriter(syntheticCluster(2000, 3000, 10));
  auto snap = writer->snapshots().read();
  std::vector<std::string> names;
  for (const auto& [name, node] : snap->cluster().nodes) names.push_back(name);
  constexpr int kThreads = 4;
  std::vector<wire::ExtenderArgs> args(kThreads);
  std::vector<std::string> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    std::vector<std::string> order = names;
    std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(order.size() - static_cast<std::size_t>(t) * 100);
    args[t].pod = gpuPod("tenant-" + std::to_string(t), "p", kH200, 1 + t);
    for (auto& n : order) args[t].nodeNames.push_back(args[t].ownedNames.emplace_back(std::move(n)));
    expected[t] = wire::encode(filterNodes(*snap, args[t]));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        if (filterResponse(*snap, args[t]) != expected[t]) wrong.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Binds and filters from many connections at once, every body sent in two
// writes as kube-scheduler's Go client does (the server waits for the rest
// with the socket's low-water mark), connections opened and dropped as its
// idle pool does: every bind is answered once, posted once, and the units it
// took are held; no request is lost between the HTTP threads, the binder's
// pool and the writer.
TEST(Extender, BindsAndFiltersWithSplitBodiesFromManyConnections) {
  std::vector<state::Object> objects = {passthroughClass(), ns("tenant-a")};
  constexpr int kNodes = 25, kPods = 120, kClients = 6;
  for (int n = 0; n < kNodes; ++n) objects.emplace_back(gpuNode("node-" + std::to_string(n)));
  for (int p = 0; p < kPods; ++p) {
    objects.emplace_back(gpuPod("tenant-a", "pend-" + std::to_string(p), kH200, 1));
  }
  auto writer = loadedWriter(objects);
  writer->start();
  std::mutex postedMu;
  std::multiset<std::string> posted;
  PodBinder binder(
      *writer,
      [&](const wire::BindingArgs& a) {
        std::lock_guard lock(postedMu);
        posted.insert(a.podName);
        return std::string();
      },
      PodBinder::Options{.threads = 8});
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  ExtenderService service(writer->snapshots(), metrics, ServiceOptions{}, &binder);
  http::Router router;
  service.addVerbRoutes(router);
  http::ServerOptions ho = serverOptions();
  ho.threads = 3;
  http::Server server(ho, std::move(router), service.observer());
  server.start();

  std::vector<std::string> names;
  for (int n = 0; n < kNodes; ++n) names.push_back("node-" + std::to_string(n));
  const std::string filterBody = extenderArgs(podJson("tenant-a", "probe", "uid-probe", 1), names);
  // The first request of each connection pauses between its halves, so the
  // server surely reads a header without its whole body at least once even
  // when a loaded machine delays its threads (bodyCompletionReads below).
  auto split = [](TestClient& c, const std::string& path, const std::string& body, bool pause) {
    const std::string head = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                             "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    c.writeRaw(head + body.substr(0, body.size() / 2));
    if (pause) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else {
      std::this_thread::yield();
    }
    c.writeRaw(body.substr(body.size() / 2));
    return c.read();
  };
  std::atomic<int> bound{0}, filtered{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      std::unique_ptr<TestClient> c;
      for (int p = t, i = 0; p < kPods; p += kClients, ++i) {
        const bool fresh = !c || i % 3 == 0;
        if (fresh) c = std::make_unique<TestClient>(server.port());  // churn
        auto f = split(*c, "/tally/filter", filterBody, fresh);
        (f.status == 200 && f.body.find(R"("Error":"")") != std::string::npos ? filtered : bad)++;
        const std::string pod = "pend-" + std::to_string(p);
        const std::string bind = R"({"PodName":")" + pod + R"(","PodNamespace":"tenant-a","PodUID":"uid-)" + pod +
                                 R"(","Node":"node-)" + std::to_string(p % kNodes) + R"("})";
        auto b = split(*c, "/tally/bind", bind, false);
        (b.status == 200 && b.body == R"({"Error":""})" ? bound : bad)++;
      }
    });
  }
  for (auto& c : clients) c.join();
  server.stop();
  binder.stop();
  writer->flush();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(bound.load(), kPods);
  EXPECT_EQ(filtered.load(), kPods);
  EXPECT_EQ(posted.size(), static_cast<std::size_t>(kPods));
  for (int p = 0; p < kPods; ++p) EXPECT_EQ(posted.count("pend-" + std::to_string(p)), 1u) << p;
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, static_cast<std::size_t>(kPods));
  EXPECT_GT(server.bodyCompletionReads(), 0u);
  writer->stop();
}

// Binds racing the pod watch and their own retries: pods the writer has not
// been given yet when their binds arrive (they wait for the pod's event),
// each bound by two threads at once to the same node (one joins the other).
// Every pod is posted exactly once, every bind answered without error, and
// the index holds each placement once.
TEST(Extender, BindsForPodsNotSeenYetAndTheirRetriesPostEachPodOnce) {
  std::vector<state::Object> objects = {passthroughClass(), ns("tenant-a")};
  constexpr int kNodes = 10, kPods = 80;
  for (int n = 0; n < kNodes; ++n) objects.emplace_back(gpuNode("node-" + std::to_string(n)));
  CacheWriter::Options o = fixtureOptions();
  o.bindPodWait = std::chrono::seconds(20);
  auto writer = loadedWriter(objects, o);
  writer->start();
  std::mutex postedMu;
  std::multiset<std::string> posted;
  PodBinder binder(
      *writer,
      [&](const wire::BindingArgs& a) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard lock(postedMu);
        posted.insert(a.podName);
        return std::string();
      },
      PodBinder::Options{.threads = 8});
  std::atomic<int> answered{0}, failed{0}, joined{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      for (int p = 0; p < kPods; ++p) {
        const std::string pod = "late-" + std::to_string(p);
        binder.bind({.podName = pod,
                     .podNamespace = "tenant-a",
                     .podUid = "uid-" + pod,
                     .node = "node-" + std::to_string(p % kNodes)},
                    [&](std::string_view outcome, std::string error, PodBinder::Times) {
                      if (!error.empty()) ++failed;
                      if (outcome == "joined") ++joined;
                      ++answered;
                    });
      }
    });
  }
  // The pod watch, behind the binds: it delivers nothing until a bind is
  // waiting for its pod (however the threads are scheduled, under a
  // sanitizer too).
  std::thread watch([&] {
    for (int i = 0; i < 2000 && writer->stats().bindPodWaitsStarted == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int p = 0; p < kPods; ++p) {
      writer->upsert(gpuPod("tenant-a", "late-" + std::to_string(p), kH200, 1));
      if (p % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (auto& t : threads) t.join();
  watch.join();
  for (int i = 0; i < 2000 && answered.load() < 2 * kPods; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  binder.stop();
  writer->flush();
  EXPECT_EQ(answered.load(), 2 * kPods);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(posted.size(), static_cast<std::size_t>(kPods));
  for (int p = 0; p < kPods; ++p) EXPECT_EQ(posted.count("late-" + std::to_string(p)), 1u) << p;
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, static_cast<std::size_t>(kPods));
  EXPECT_GT(writer->stats().bindPodArrivals, 0u);
  // Every bind that waited found its pod.
  EXPECT_EQ(writer->stats().bindPodArrivals, writer->stats().bindPodWaitsStarted);
  EXPECT_EQ(writer->stats().bindPodWaitsTimedOut, 0u);
  std::printf("binds for pods not seen yet: %llu waited and found their pod, %d joined a bind in flight\n",
              static_cast<unsigned long long>(writer->stats().bindPodArrivals), joined.load());
  writer->stop();
}

// An API server that answers slower the more Bindings it is sent at once
// (25 ms per concurrent POST): 240 binds arrive together at 48 bind threads.
// The binder cuts its POST limit, keeps the rest waiting in order, and answers
// "expired" without posting every bind that could no longer be answered
// within the deadline; no POST starts after its bind's deadline, every bind is
// answered, and an expired bind holds no units.
TEST(Extender, BindsBeyondWhatTheApiServerAnswersInTimeWaitOrExpireWithoutPosting) {
  std::vector<state::Object> objects = {passthroughClass(), ns("tenant-a")};
  constexpr int kNodes = 40, kPods = 240;
  for (int n = 0; n < kNodes; ++n) objects.emplace_back(gpuNode("node-" + std::to_string(n)));
  for (int p = 0; p < kPods; ++p) objects.emplace_back(gpuPod("tenant-a", "slow-" + std::to_string(p), kH200, 1));
  auto writer = loadedWriter(objects, fixtureOptions());
  writer->start();
  using Clock = std::chrono::steady_clock;
  constexpr auto kDeadline = std::chrono::milliseconds(600);
  std::atomic<int> running{0}, most{0}, late{0};
  std::mutex mu;
  std::map<std::string, Clock::time_point> sentAt;
  std::set<std::string> posted;
  PodBinder binder(
      *writer,
      [&](const wire::BindingArgs& a) {
        {
          std::lock_guard lock(mu);
          // (10 ms for the step from the slot to this line on a loaded machine)
          if (Clock::now() > sentAt.at(a.podName) + kDeadline + std::chrono::milliseconds(10)) ++late;
          posted.insert(a.podName);
        }
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(25) * now);
        --running;
        return std::string();
      },
      PodBinder::Options{.threads = 48,
                         .queueDeadline = kDeadline,
                         .postLimit = {.min = 2, .max = 48, .initial = 24, .target = std::chrono::milliseconds(100)}});
  std::atomic<int> answered{0}, bound{0}, expired{0}, other{0};
  std::mutex expiredMu;
  std::set<std::string> expiredPods;
  for (int p = 0; p < kPods; ++p) {
    const std::string pod = "slow-" + std::to_string(p);
    {
      std::lock_guard lock(mu);
      sentAt[pod] = Clock::now();
    }
    binder.bind({.podName = pod,
                 .podNamespace = "tenant-a",
                 .podUid = "uid-" + pod,
                 .node = "node-" + std::to_string(p % kNodes)},
                [&, pod](std::string_view outcome, std::string, PodBinder::Times) {
                  if (outcome == "bound") {
                    ++bound;
                  } else if (outcome == "expired") {
                    ++expired;
                    std::lock_guard lock(expiredMu);
                    expiredPods.insert(pod);
                  } else {
                    ++other;
                  }
                  ++answered;
                });
  }
  for (int i = 0; i < 2000 && answered.load() < kPods; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const unsigned limitAfter = binder.postLimit();
  binder.stop();
  writer->flush();
  EXPECT_EQ(answered.load(), kPods);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(bound.load() + expired.load(), kPods);
  EXPECT_GT(expired.load(), 0);
  EXPECT_EQ(late.load(), 0) << "a Binding was posted after its bind's deadline";
  EXPECT_LT(limitAfter, 24u) << "the limit never fell although every answer was slower than the target";
  EXPECT_LE(most.load(), 24) << "more POSTs ran at once than the first limit";
  EXPECT_EQ(posted.size(), static_cast<std::size_t>(bound.load()));
  for (const auto& pod : expiredPods) EXPECT_FALSE(posted.contains(pod)) << pod;
  // Only the posted binds hold their units.
  EXPECT_EQ(writer->snapshots().read()->assumedPlacements, static_cast<std::size_t>(bound.load()));
  std::printf("slow API server: %d bound, %d expired unposted, at most %d POSTs at once, limit now %u\n", bound.load(),
              expired.load(), most.load(), limitAfter);
  writer->stop();
}

TEST(ExtenderMetrics, ThreadsAnsweringOneVerbCountEveryResponse) {
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  constexpr int kThreads = 4, kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) metrics.response("prioritize", 200, 0.0001, 0.0001);
    });
  }
  for (auto& t : threads) t.join();
  const std::string text = registry.render();
  const std::string total = std::to_string(kThreads * kPerThread);
  EXPECT_NE(text.find(R"(tally_extender_requests_total{code="200",route="prioritize"} )" + total + "\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(tally_extender_request_duration_seconds_count{route="prioritize"} )" + total + "\n"),
            std::string::npos);
}
