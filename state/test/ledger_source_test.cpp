// The ledger directory source of state::Informers, on the poller: re-read when
// the directory changes, the history carried in the model, and a failed read
// keeping the last revision read whole. The ledger needs no API server.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/state/informers.hpp"
#include "tally/state/writer.hpp"
#include "unreachable_server.hpp"

namespace tally::state {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string record(std::string_view id, std::string_view extra = "") {
  std::string text = "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: ";
  text += id;
  text +=
      "\nspec:\n  organization: acme\n  project: \"\"\n  profileId: h200\n  devices: 1\n  state: pending\n"
      "  requestedAt: \"2026-09-20T09:00:00Z\"\n  startsAt: \"2026-10-01T00:00:00Z\"\n"
      "  addonId: gpu-h200-reserved\n  billingReference: OPS-1\n";
  text += extra;
  return text;
}

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

// The API server is unreachable (nothing listens on port 1; the other
// informers retry in the background) and each test has its own ledger folder.
// TearDown stops what a test started and removes the folder, also after a
// failed ASSERT.
class LedgerSource : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    root_ = fs::temp_directory_path() / ("tally-ledger-source-" + std::to_string(random()));
    fs::create_directories(root_);
    setLogLevel(LogLevel::kError);  // the unreachable server's retries
    client_ = testing::unreachableClient();
    ASSERT_TRUE(client_);
    options_.billingPlans.reset();
    options_.organizations = false;
    options_.ledgerDir = root_ / "ledger";
    options_.ledgerInterval = 50ms;
    options_.pollInterval = 10ms;
  }

  void TearDown() override {
    if (informers_) informers_->stop();
    if (writer_) writer_->stop();
    informers_.reset();
    writer_.reset();
    fs::remove_all(root_);
    setLogLevel(LogLevel::kInfo);
  }

  // The writer (watching only the ledger) and the informers, started.
  Writer& start(std::function<model::Timestamp()> clock = {}) {
    Writer::Options writerOptions{.publishInterval = 1ms, .watched = {model::Kind::Ledger}};
    if (clock) writerOptions.clock = std::move(clock);
    writer_ = std::make_unique<Writer>(std::move(writerOptions));
    writer_->start();
    informers_ = std::make_unique<Informers>(client_, *writer_, options_);
    informers_->start();
    return *writer_;
  }

  fs::path root_;

 private:
  std::shared_ptr<runtime::Client> client_;
  SourceOptions options_;
  std::unique_ptr<Writer> writer_;
  std::unique_ptr<Informers> informers_;
};

TEST_F(LedgerSource, RereadsOnChangeRemembersVanishedRecordsAndKeepsTheLastRevisionOnAFailedRead) {
  const fs::path& root = root_;
  fs::create_directories(root / ".worktrees/a");
  fs::create_directories(root / ".worktrees/b");
  std::ofstream(root / ".worktrees/a/gpu-res-1.yaml") << record("gpu-res-1");
  std::ofstream(root / ".worktrees/a/gpu-res-2.yaml") << record("gpu-res-2");
  std::ofstream(root / ".worktrees/b/gpu-res-2.yaml") << record("gpu-res-2");
  fs::create_directory_symlink(root / ".worktrees/a", root / "ledger");

  Writer& writer = start();
  auto ledger = [&] { return writer.snapshots().read()->cluster().ledger; };

  ASSERT_TRUE(eventually([&] { return ledger().records.size() == 2; }));
  EXPECT_TRUE(ledger().history.empty());

  // git-sync's swap: gpu-res-1 is gone in the new revision, and stays missing.
  fs::create_directory_symlink(root / ".worktrees/b", root / "ledger.new");
  fs::rename(root / "ledger.new", root / "ledger");
  ASSERT_TRUE(eventually([&] { return ledger().records.size() == 1; }));
  ASSERT_EQ(ledger().history.size(), 1u);
  EXPECT_EQ(ledger().history[0].id, "gpu-res-1");
  EXPECT_EQ(ledger().history[0].rule, model::LedgerRule::Disappeared);
  std::ofstream(root / ".worktrees/b/README.yaml.txt") << "not a record";  // not a record file: same signature
  std::ofstream(root / ".worktrees/b/gpu-res-3.yaml") << record("gpu-res-3");
  ASSERT_TRUE(eventually([&] { return ledger().records.size() == 2; }));
  ASSERT_EQ(ledger().history.size(), 1u) << "the vanished record is still missing in the revision after";

  // The link points nowhere: the last revision stays, marked with the error.
  fs::remove(root / "ledger");
  fs::create_directory_symlink(root / ".worktrees/gone", root / "ledger");
  ASSERT_TRUE(eventually([&] { return ledger().readError.has_value(); }));
  EXPECT_EQ(ledger().records.size(), 2u);
  EXPECT_NE(ledger().readError->source.find("ledger"), std::string::npos);

  // Readable again: the error clears.
  fs::remove(root / "ledger");
  fs::create_directory_symlink(root / ".worktrees/b", root / "ledger");
  ASSERT_TRUE(eventually([&] { return !ledger().readError.has_value(); }));
}

// The audit's StaleCapacity reads when the ledger was last confirmed: a
// ledger nobody changes is confirmed current while it can be read, and no
// longer once it cannot.
TEST_F(LedgerSource, AQuietReadableLedgerIsConfirmedCurrentAndAnUnreadableOneIsNot) {
  const fs::path& root = root_;
  fs::create_directories(root / "ledger");
  std::ofstream(root / "ledger/gpu-res-1.yaml") << record("gpu-res-1");

  std::atomic<model::Timestamp> now{1000};
  Writer& writer = start([&] { return now.load(); });
  auto confirmed = [&]() -> model::Timestamp {
    const auto& caches = writer.snapshots().read()->cluster().caches;
    auto it = caches.find(model::Kind::Ledger);
    return it == caches.end() || !it->second.synced ? -1 : it->second.lastSynced;
  };
  ASSERT_TRUE(eventually([&] { return confirmed() == 1000; }));
  now = 2000;
  EXPECT_TRUE(eventually([&] { return confirmed() == 2000; }, 15s)) << "the unchanged ledger was never confirmed";

  fs::rename(root / "ledger", root / "gone");
  ASSERT_TRUE(eventually([&] { return writer.snapshots().read()->cluster().ledger.readError.has_value(); }));
  now = 3000;
  std::this_thread::sleep_for(7s);  // longer than the source confirms a readable ledger
  EXPECT_EQ(confirmed(), 2000) << "an unreadable ledger was confirmed current";
  fs::rename(root / "gone", root / "ledger");
  EXPECT_TRUE(eventually([&] { return confirmed() == 3000; }, 15s));
}

}  // namespace
}  // namespace tally::state
