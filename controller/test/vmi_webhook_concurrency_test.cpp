// The VMI webhook's shared state under concurrency (run under TSan): reviews
// run at once on many threads (as on the webhook's pool) while the writer
// publishes snapshots and scrapes read the metrics. Reinvoked and dry-run
// reviews write nothing and are answered from the snapshot; new VMIs need
// writes, and the API server is unreachable here, so they are refused with
// the failed write named (and what they wrote taken back, which fails too).
// No API server: the e2e test races 20 VMIs against a real one.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/controller/vmi_webhook.hpp"
#include "tally/model/vmi.hpp"
#include "tally/model/testing/fixtures.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;

model::Node vmNode(const std::string& name, std::int64_t devices) {
  model::Node n = model::testing::gpuNode(name, model::NodeMode::VmPassthrough, model::testing::kH200, devices);
  n.activeMode = n.expectedMode = model::NodeMode::VmPassthrough;
  return n;
}

// Attached with token "tok" to VMI `vmi`, on n0 (what a first call wrote).
model::GpuDevice attachedDevice(int i) {
  model::GpuDevice d;
  d.ns = "t";
  d.name = "d" + std::to_string(i);
  d.uid = "uid-" + d.name;
  d.className = "h200";
  d.count = 1;
  d.phase = model::DevicePhase::Attached;
  d.node = "n0";
  d.attachedTo = model::ObjectRef{"t", "vm" + std::to_string(i), ""};
  d.attachToken = "tok" + std::to_string(i);
  d.attachSet = {d.name};
  d.attachedAt = toUnixTime(std::chrono::system_clock::now()).seconds;
  return d;
}

std::string review(const std::string& name, const std::string& annotations, bool dryRun) {
  return std::string(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-)") + name +
         R"(","kind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachineInstance"},)" +
         R"("resource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachineinstances"},)" +
         R"("namespace":"t","name":")" + name + R"(","operation":"CREATE","userInfo":{"username":"u"},"dryRun":)" +
         (dryRun ? "true" : "false") + R"(,"object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance",)" +
         R"("metadata":{"name":")" + name + R"(","namespace":"t","annotations":{)" + annotations +
         R"(}},"spec":{"domain":{"devices":{}}}}}})";
}

TEST(VmiWebhookConcurrency, ReviewsOnManyThreadsWhileTheWriterPublishes) {
  setLogLevel(LogLevel::kError);
  runtime::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";  // nothing listens: writes fail fast
  config.connectTimeout = 50ms;
  config.requestTimeout = 100ms;
  auto client = runtime::Client::create(config, runtime::RetryPolicy{1, 1ms, 1ms});
  ASSERT_TRUE(client) << client.error().describe();

  observability::Registry registry;
  VmiWebhookOptions o;
  o.placementWait = 50ms;
  o.metrics = &registry;
  VmiWebhook webhook(*client, o);

  state::Writer::Options wo;
  wo.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  wo.publishInterval = 1ms;
  wo.observers = {&webhook};
  state::Writer writer(wo);
  webhook.readFrom(writer.snapshots());
  writer.upsert(model::testing::ns("t"));
  writer.upsert(model::testing::passthroughClass());
  writer.upsert(
      std::vector<model::PermittedHostDevice>{{std::string(model::testing::kH200), "10DE:2335", false, true}});
  for (int n = 0; n < 4; ++n) writer.upsert(vmNode("n" + std::to_string(n), 8));
  for (int i = 0; i < 4; ++i) writer.upsert(attachedDevice(i));
  writer.start();
  writer.flush();

  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, refused{0}, unexpected{0};
  std::vector<std::thread> reviewers;
  for (int t = 0; t < 4; ++t) {
    reviewers.emplace_back([&, t] {
      for (int round = 0; !stop; ++round) {
        const int i = (t + round) % 4;
        std::string body;
        bool expectAllowed = true;
        switch (round % 3) {
          case 0:  // reinvoked: its attachment is on every device already
            body = review("vm" + std::to_string(i),
                          R"("gpu.tally.dev/devices":"d)" + std::to_string(i) + R"(","gpu.tally.dev/attachment":"tok)" +
                              std::to_string(i) + R"(")",
                          false);
            break;
          case 1:  // a dry run of a new VMI with a template
            body =
                review("dry" + std::to_string(t), R"("gpu.tally.dev/device-templates":"[{\"class\":\"h200\"}]")", true);
            break;
          default:  // a new VMI: its write fails
            body = review("new" + std::to_string(t), R"("gpu.tally.dev/device-templates":"[{\"class\":\"h200\"}]")",
                          false);
            expectAllowed = false;
        }
        auto request = runtime::admission::decodeAdmissionReview(body);
        if (!request) {
          if (unexpected++ == 0) ADD_FAILURE() << request.error().describe();
          continue;
        }
        const runtime::admission::AdmissionResponse r = webhook.review(*request).response;
        if (r.allowed != expectAllowed || (r.allowed && r.patch.empty())) {
          if (unexpected++ == 0) ADD_FAILURE() << "round " << round << ": " << r.message;
        } else if (r.allowed) {
          ++answered;
        } else {
          ++refused;
        }
      }
    });
  }
  std::thread changes([&] {
    for (int round = 0; !stop; ++round) {
      writer.upsert(vmNode("n" + std::to_string(1 + round % 3), 8 - round % 2));
      writer.upsert(attachedDevice(round % 4));
      std::this_thread::sleep_for(1ms);
    }
  });
  std::thread scrapes([&] {
    while (!stop) {
      EXPECT_FALSE(registry.render().empty());
      std::this_thread::sleep_for(2ms);
    }
  });
  std::this_thread::sleep_for(1500ms);
  stop = true;
  for (auto& t : reviewers) t.join();
  changes.join();
  scrapes.join();
  writer.stop();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(answered.load(), 10);
  EXPECT_GT(refused.load(), 2);
  const std::string metrics = registry.render();
  EXPECT_NE(metrics.find("tally_controller_vmi_reviews_total{result=\"reinvoked\"}"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tally_controller_vmi_reviews_total{result=\"dry-run\"}"), std::string::npos);
}

}  // namespace
}  // namespace tally::controller
