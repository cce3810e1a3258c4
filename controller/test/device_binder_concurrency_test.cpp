// The device binder's shared state under concurrency (run under TSan): the
// writer thread reports changes and publishes (objectChanged, published:
// enqueues), the binder's worker reconciles (reads snapshots, prunes and
// reads what it holds ahead), scrapes read the snapshot, and leadership terms
// start and stop (startTerm resets what the worker keeps). No API server: the
// devices are Bound on live nodes, so every reconcile decides on the snapshot
// alone, and the Pending ones fail their read of an unreachable server
// (requeued), which exercises the error path too.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/model/testing/fixtures.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;

model::GpuDevice held(int i, bool bound) {
  model::GpuDevice d;
  d.ns = "t";
  d.name = "d" + std::to_string(i);
  d.uid = "uid-" + d.name;
  d.className = "h200";
  d.count = 1;
  d.created = 1'800'000'000 + i;
  d.phase = bound ? model::DevicePhase::Bound : model::DevicePhase::Pending;
  if (bound) d.node = "n" + std::to_string(i % 4);
  return d;
}

TEST(DeviceBinderConcurrency, ChangesReconcilesScrapesAndTermsShareNothingUnsafely) {
  // Every failed read would log a warning: thousands in a second and a half.
  setLogLevel(LogLevel::kError);
  runtime::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";  // nothing listens: reads fail fast
  config.connectTimeout = 50ms;
  config.requestTimeout = 100ms;
  auto client = runtime::Client::create(config, runtime::RetryPolicy{1, 1ms, 1ms});
  ASSERT_TRUE(client) << client.error().describe();

  observability::Registry registry;
  DeviceBinderOptions o;
  o.instance = "test";
  o.retryInterval = 5ms;
  o.metrics = &registry;
  DeviceBinder binder(*client, o);

  state::Writer::Options wo;
  wo.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  wo.publishInterval = 1ms;
  wo.observers = {&binder};
  state::Writer writer(wo);
  binder.readFrom(writer.snapshots());

  runtime::Controller controller(binder.controllerOptions(), [&](const std::string& key, std::stop_token stop) {
    return binder.reconcile(key, stop);
  });
  binder.enqueueInto(controller);

  writer.upsert(model::testing::ns("t"));
  writer.upsert(model::testing::passthroughClass());
  for (int n = 0; n < 4; ++n) writer.upsert(model::testing::gpuNode("n" + std::to_string(n)));
  writer.start();

  std::atomic<bool> stop{false};
  std::atomic<int> terms{0};
  // Leadership comes and goes: each start() begins a term (startTerm) while
  // the writer keeps enqueueing.
  std::thread leadership([&] {
    while (!stop) {
      controller.start();
      terms.fetch_add(1);
      std::this_thread::sleep_for(30ms);
      controller.stop();
    }
  });
  std::thread changes([&] {
    for (int round = 0; !stop; ++round) {
      for (int i = 0; i < 40; ++i) writer.upsert(held(i, (i + round) % 5 != 0));
      writer.upsert(model::testing::gpuNode("n" + std::to_string(round % 4), model::NodeMode::VmPassthrough,
                                            model::testing::kH200, 8 - round % 2));
      if (round % 7 == 0) writer.remove(model::Kind::GpuDevice, "t", "d" + std::to_string(round % 40));
      std::this_thread::sleep_for(1ms);
    }
  });
  std::thread scrapes([&] {
    while (!stop) {
      auto text = registry.render();
      EXPECT_FALSE(text.empty());
      std::this_thread::sleep_for(2ms);
    }
  });
  // A second caller of reconcile beside the controller's worker would break
  // the one-worker rule; heldAhead() is what tests and metrics read meanwhile.
  std::thread readers([&] {
    while (!stop) {
      (void)binder.heldAhead();
      std::this_thread::sleep_for(1ms);
    }
  });
  std::this_thread::sleep_for(1500ms);
  stop = true;
  changes.join();
  scrapes.join();
  readers.join();
  leadership.join();
  writer.stop();
  EXPECT_GT(terms.load(), 5);
  EXPECT_GT(controller.stats().reconciles, 0u) << "the worker never reconciled a woken device";
  EXPECT_EQ(binder.heldAhead(), 0u) << "nothing was written, so nothing is held ahead";
}

}  // namespace
}  // namespace tally::controller
