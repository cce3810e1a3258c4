// How a binary joins the writer: observers hear of changes and add nothing to
// a snapshot, extensions add a part that readers find by its type.

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tally/state/testing/recording_extension.hpp"
#include "tally/state/writer.hpp"

namespace tally::state {
namespace {

using testing::RecordingExtension;

// Counts the nodes of the live index after each batch.
class NodeCounter final : public Observer {
 public:
  void applied(const model::UsageIndex& live) override { seen.push_back(live.cluster().nodes.size()); }
  std::vector<std::size_t> seen;
};

// A part of another type beside RecordingExtension's.
class Generation final : public Extension<int> {
 public:
  bool tick(model::UsageIndex&, Clock::time_point) override { return false; }
  Clock::time_point nextDeadline() const override { return Clock::time_point::max(); }
  std::shared_ptr<const int> publish(const model::Cluster&) override { return std::make_shared<const int>(++count_); }

 private:
  int count_ = 0;
};

TEST(Extension, EachPartIsFoundByItsTypeAndAnObserverPublishesNone) {
  RecordingExtension keys;
  Generation generation;
  NodeCounter counter;
  Writer writer(Writer::Options{.observers = {&keys, &counter}, .extensions = {&keys, &generation}});
  model::Node node;
  node.name = "n1";
  writer.upsert(node);
  node.name = "n2";
  writer.upsert(node);
  writer.flush();
  auto snap = writer.snapshots().read();
  ASSERT_NE(snap->part<RecordingExtension::Keys>(), nullptr);
  EXPECT_TRUE(snap->part<RecordingExtension::Keys>()->empty());
  ASSERT_NE(snap->part<int>(), nullptr);
  EXPECT_EQ(*snap->part<int>(), 2);  // the writer's first snapshot, then this one
  EXPECT_EQ(snap->part<std::string>(), nullptr);
  EXPECT_EQ(counter.seen, (std::vector<std::size_t>{2}));  // one batch, after which the index held both nodes
}

TEST(Extension, TwoExtensionsPublishingOnePartTypeAreRefused) {
  RecordingExtension a, b;
  EXPECT_THROW(Writer(Writer::Options{.extensions = {&a, &b}}), std::invalid_argument);
}

}  // namespace
}  // namespace tally::state
