// The Alertmanager source's polling thread next to a running state writer and
// readers of its snapshots (TSan: `make test-sanitizers`): alerts published by
// its tasks are seen by readers, and start/stop while the writer runs is clean.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tally/controller/alert_source.hpp"
#include "tally/runtime/http/testing/stand_in.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;

TEST(AlertSourceConcurrency, PollsWhileTheWriterPublishesAndReadersRead) {
  runtime::http::testing::StandIn server;  // one firing alert of pool h200
  server.answer("200 OK", R"([{"labels":{"alertname":"GpuXidErrors","gpu_pool":"h200"}}])");
  state::Writer writer({});
  writer.start();
  std::atomic<int> woken{0};
  AlertSourceOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.interval = 5ms;
  o.changed = [&] { ++woken; };
  AlertSource source(writer, o);
  source.start();
  std::atomic<bool> seen{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!seen && std::chrono::steady_clock::now() < deadline) {
        auto snap = writer.snapshots().read();
        if (snap && !snap->cluster().alerts.empty() && snap->cluster().alerts.front().name == "GpuXidErrors") {
          seen = true;
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (auto& r : readers) r.join();
  source.stop();
  source.start();  // a second start after a stop polls again
  std::this_thread::sleep_for(20ms);
  source.stop();
  writer.stop();
  EXPECT_TRUE(seen);
  // The alerts changed once (empty -> firing); later polls read the same.
  EXPECT_EQ(woken.load(), 1);
}

}  // namespace
}  // namespace tally::controller
