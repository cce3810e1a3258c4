// The ledger directory source of state::Informers, on the poller: re-read when
// the directory changes, the history carried in the model, and a failed read
// keeping the last revision read whole. The API server is unreachable here
// (the other informers retry in the background): the ledger needs none.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/state/informers.hpp"
#include "tally/state/writer.hpp"

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

TEST(LedgerSource, RereadsOnChangeRemembersVanishedRecordsAndKeepsTheLastRevisionOnAFailedRead) {
  std::random_device random;
  const fs::path root = fs::temp_directory_path() / ("tally-ledger-source-" + std::to_string(random()));
  fs::create_directories(root / ".worktrees/a");
  fs::create_directories(root / ".worktrees/b");
  std::ofstream(root / ".worktrees/a/gpu-res-1.yaml") << record("gpu-res-1");
  std::ofstream(root / ".worktrees/a/gpu-res-2.yaml") << record("gpu-res-2");
  std::ofstream(root / ".worktrees/b/gpu-res-2.yaml") << record("gpu-res-2");
  fs::create_directory_symlink(root / ".worktrees/a", root / "ledger");

  setLogLevel(LogLevel::kError);  // the unreachable server's retries
  runtime::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";  // nothing listens
  config.connectTimeout = 100ms;
  auto client = runtime::Client::create(config);
  ASSERT_TRUE(client) << client.error().describe();
  SourceOptions options;
  options.billingPlans.reset();
  options.organizations = false;
  options.ledgerDir = root / "ledger";
  options.ledgerInterval = 50ms;
  options.pollInterval = 10ms;
  Writer writer(Writer::Options{.publishInterval = 1ms, .watched = {model::Kind::Ledger}});
  writer.start();
  Informers informers(*client, writer, options);
  informers.start();
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

  informers.stop();
  writer.stop();
  fs::remove_all(root);
  setLogLevel(LogLevel::kInfo);
}

// The audit's StaleCapacity reads when the ledger was last confirmed: a
// ledger nobody changes is confirmed current while it can be read, and no
// longer once it cannot.
TEST(LedgerSource, AQuietReadableLedgerIsConfirmedCurrentAndAnUnreadableOneIsNot) {
  std::random_device random;
  const fs::path root = fs::temp_directory_path() / ("tally-ledger-quiet-" + std::to_string(random()));
  fs::create_directories(root / "ledger");
  std::ofstream(root / "ledger/gpu-res-1.yaml") << record("gpu-res-1");

  setLogLevel(LogLevel::kError);
  runtime::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";
  config.connectTimeout = 100ms;
  auto client = runtime::Client::create(config);
  ASSERT_TRUE(client) << client.error().describe();
  SourceOptions options;
  options.billingPlans.reset();
  options.organizations = false;
  options.ledgerDir = root / "ledger";
  options.ledgerInterval = 50ms;
  options.pollInterval = 10ms;
  std::atomic<model::Timestamp> now{1000};
  Writer writer(
      Writer::Options{.publishInterval = 1ms, .watched = {model::Kind::Ledger}, .clock = [&] { return now.load(); }});
  writer.start();
  Informers informers(*client, writer, options);
  informers.start();
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

  informers.stop();
  writer.stop();
  fs::remove_all(root);
  setLogLevel(LogLevel::kInfo);
}

}  // namespace
}  // namespace tally::state
