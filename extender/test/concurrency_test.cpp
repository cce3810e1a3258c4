#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "fixtures.hpp"
#include "http_client.hpp"
#include "tally/extender/service.hpp"
#include "tally/extender/verbs.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;

TEST(SnapshotCell, ReadersNeverSeeAFreedValueWhileTheWriterPublishes) {
  SnapshotCell<std::vector<int>> cell;
  cell.publish(std::make_unique<const std::vector<int>>(64, 0));
  std::atomic<bool> done{false};
  std::vector<std::thread> readers;
  std::atomic<std::uint64_t> reads{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      int last = 0;
      while (!done.load()) {
        auto v = cell.read();
        int first = (*v)[0];
        for (int x : *v) ASSERT_EQ(x, first);  // never a torn or freed vector
        ASSERT_GE(first, last);               // publication order is seen in order
        last = first;
        ++reads;
      }
    });
  }
  for (int i = 1; i <= 5000; ++i) cell.publish(std::make_unique<const std::vector<int>>(64, i));
  done = true;
  for (auto& r : readers) r.join();
  cell.reclaim();
  EXPECT_EQ(cell.retiredCount(), 0u);
  EXPECT_GT(reads.load(), 0u);
}

TEST(Extender, FiltersOverHttpStayConsistentWhileTheWriterChurns) {
  CacheWriter::Options o;
  o.publishInterval = std::chrono::milliseconds(1);
  auto writer = loadedWriter(syntheticCluster(50, 200, 5), o);
  writer->start();
  observability::Registry registry;
  ExtenderMetrics metrics(registry);
  ExtenderService service(writer->snapshots(), metrics, ServiceOptions{}, nullptr);
  Router router;
  service.addVerbRoutes(router);
  service.addOperationRoutes(router);
  HttpServerOptions ho;
  ho.threads = 4;
  HttpServer server(ho, std::move(router), service.observer());
  server.start();

  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int i = 0; !done.load(); ++i) {
      std::string node = "node-" + std::to_string(i % 50);
      writer->upsert(gpuPod("tenant-1", "churn-" + std::to_string(i % 100), "churn-uid-" + std::to_string(i % 100),
                            1 + i % 3, i % 2 ? node : ""));
      if (i % 7 == 0) writer->remove(model::Kind::Pod, "tenant-1", "churn-" + std::to_string((i + 50) % 100));
      if (i % 11 == 0) writer->upsert(gpuNode(node, 8 + i % 2));
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
        bool good = r.status == 200 && (i % 3 == 2 ? r.body.front() == '[' : r.body.find("\"Error\":\"\"") != std::string::npos);
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
    args[t].pod = gpuPod("tenant-" + std::to_string(t), "p", "uid-p", 1 + t);
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
