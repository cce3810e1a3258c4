// The tree's publication cell and the state writer under concurrent readers
// (TSan runs these: label `concurrent`).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tally/model/testing/fixtures.hpp"
#include "tally/state/testing/recording_extension.hpp"
#include "tally/common/snapshot_cell.hpp"
#include "tally/state/writer.hpp"

namespace tally::state {
namespace {

using namespace std::chrono_literals;

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
        ASSERT_GE(first, last);                // publication order is seen in order
        last = first;
        ++reads;
      }
    });
  }
  // At least 5,000 publications, and on until the readers have read during
  // them (on a loaded machine the readers may not have run at all in the
  // first 5,000).
  for (int i = 1; i <= 5000 || reads.load() < 1000; ++i) cell.publish(std::make_unique<const std::vector<int>>(64, i));
  done = true;
  for (auto& r : readers) r.join();
  cell.reclaim();
  EXPECT_EQ(cell.retiredCount(), 0u);
  EXPECT_GT(reads.load(), 0u);
}

TEST(SnapshotCell, NestedGuardsOnOneThreadKeepTheOlderValueAlive) {
  SnapshotCell<std::vector<int>> cell;
  cell.publish(std::make_unique<const std::vector<int>>(1000, 1));
  auto outer = cell.read();
  cell.publish(std::make_unique<const std::vector<int>>(1000, 2));
  {
    auto inner = cell.read();  // a second guard on this thread
    EXPECT_EQ((*inner)[0], 2);
  }
  // The inner guard's end must not withdraw the outer one's announcement.
  cell.publish(std::make_unique<const std::vector<int>>(1000, 3));
  cell.reclaim();
  EXPECT_GE(cell.retiredCount(), 1u) << "the value the outer guard reads was freed";
  for (int x : *outer) ASSERT_EQ(x, 1);
}

TEST(WriterConcurrency, ReadersSeeWholeSnapshotsWhileTheWriterThreadApplies) {
  testing::RecordingExtension ext;
  Writer::Options o;
  o.publishInterval = 1ms;
  o.observers = {&ext};
  o.extensions = {&ext};
  Writer writer(o);
  writer.upsert(model::testing::ns("t"));
  for (int n = 0; n < 16; ++n) writer.upsert(model::testing::gpuNode("n" + std::to_string(n)));
  writer.start();
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      std::uint64_t last = 0;
      while (!done.load()) {
        auto snap = writer.snapshots().read();
        ASSERT_GE(snap->generation, last);
        last = snap->generation;
        // The extension's part and the usage sums were built in one publication.
        const auto& keys = *snap->part<testing::RecordingExtension::Keys>();
        std::int64_t used = 0;
        for (int n = 0; n < 16; ++n) used += snap->usage.nodeUsed("n" + std::to_string(n), model::testing::kH200);
        ASSERT_EQ(used, static_cast<std::int64_t>(keys.size()));
        ++reads;
      }
    });
  }
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "p" + std::to_string(i % 200);
    if (i % 3 == 2)
      writer.remove(model::Kind::Pod, "t", name);
    else
      writer.upsert(model::testing::gpuPod("t", name, model::testing::kH200, 1, "n" + std::to_string(i % 16)));
  }
  for (int i = 0; i < 400 && writer.queued() > 0; ++i) std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(20ms);
  done = true;
  for (auto& t : readers) t.join();
  writer.stop();
  EXPECT_GT(reads.load(), 0u);
  EXPECT_GT(writer.stats().publishes, 1u);
}

}  // namespace
}  // namespace tally::state
