#include "tally/codec/ledger_directory.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <unistd.h>

namespace tally::codec {
namespace {

namespace fs = std::filesystem;

std::string record(std::string_view id, std::string_view state = "pending") {
  std::string text = R"(apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: )";
  text += id;
  text += R"(
spec:
  organization: acme
  project: ""
  profileId: nvidia-h200-passthrough
  devices: 1
  state: )";
  text += state;
  text += R"(
  requestedAt: "2026-09-20T09:00:00Z"
  startsAt: "2026-10-01T00:00:00Z"
  addonId: gpu-h200-reserved
  billingReference: OPS-1
)";
  return text;
}

class LedgerDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / ("tally-ledger-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((dir_ / relative).parent_path());
    std::ofstream(dir_ / relative) << text;
  }
  fs::path dir_;
};

TEST_F(LedgerDirectory, ReadsYamlFilesInPathOrder) {
  write("b/gpu-res-2.yaml", record("gpu-res-2"));
  write("a.yml", record("gpu-res-1"));
  write("c.yaml", record("gpu-res-3"));
  write("README.md", "not a record");
  auto ledger = loadLedgerDirectory(dir_);
  ASSERT_TRUE(ledger) << ledger.error().describe();
  EXPECT_TRUE(ledger->loaded);
  ASSERT_EQ(ledger->records.size(), 3u) << (ledger->invalid.empty() ? "" : ledger->invalid[0].problems[0].message);
  EXPECT_EQ(ledger->records[0].id, "gpu-res-1");
  EXPECT_EQ(ledger->records[0].source, "a.yml");
  EXPECT_EQ(ledger->records[1].source, "b/gpu-res-2.yaml");
  EXPECT_EQ(ledger->records[2].id, "gpu-res-3");
}

TEST_F(LedgerDirectory, HiddenEntriesAreSkipped) {
  write(".git/objects/x.yaml", record("gpu-res-9"));
  write("..data/r.yaml", record("gpu-res-8"));
  write(".hidden.yaml", record("gpu-res-7"));
  write("r.yaml", record("gpu-res-1"));
  auto ledger = loadLedgerDirectory(dir_);
  ASSERT_TRUE(ledger);
  ASSERT_EQ(ledger->records.size(), 1u);
  EXPECT_EQ(ledger->records[0].id, "gpu-res-1");
}

TEST_F(LedgerDirectory, InvalidRecordsAreKeptWithTheirSource) {
  write("good.yaml", record("gpu-res-1"));
  write("bad.yaml", record("gpu-res-2", "exploded"));
  write("broken.yaml", "apiVersion: [unclosed\n");
  auto ledger = loadLedgerDirectory(dir_);
  ASSERT_TRUE(ledger);
  EXPECT_EQ(ledger->records.size(), 1u);
  ASSERT_EQ(ledger->invalid.size(), 2u);
  EXPECT_EQ(ledger->invalid[0].source, "bad.yaml");
  EXPECT_EQ(ledger->invalid[1].source, "broken.yaml");
}

TEST_F(LedgerDirectory, EmptyDirectoryIsALoadedEmptyLedger) {
  auto ledger = loadLedgerDirectory(dir_);
  ASSERT_TRUE(ledger);
  EXPECT_TRUE(ledger->loaded);
  EXPECT_TRUE(ledger->records.empty());
}

TEST_F(LedgerDirectory, MissingDirectoryIsAnError) {
  auto ledger = loadLedgerDirectory(dir_ / "nope");
  ASSERT_FALSE(ledger);
  EXPECT_NE(ledger.error().describe().find("not a directory"), std::string::npos);
}

TEST(LedgerDirectoryExample, ExampleLedgerIsValid) {
  auto ledger = loadLedgerDirectory(fs::path(TALLY_EXAMPLES_DIR) / "ledger");
  ASSERT_TRUE(ledger);
  EXPECT_TRUE(ledger->invalid.empty()) << ledger->invalid[0].problems[0].message;
  ASSERT_EQ(ledger->records.size(), 4u);
  EXPECT_EQ(ledger->records[0].state, model::ReservationState::Released);   // gpu-res-0950
  EXPECT_EQ(ledger->records[1].state, model::ReservationState::Releasing);  // gpu-res-0990
  EXPECT_EQ(ledger->records[2].state, model::ReservationState::Active);
  EXPECT_EQ(ledger->records[3].state, model::ReservationState::Pending);
}

// git-sync's layout: <root>/<link> -> <root>/.worktrees/<hash>, swapped per revision.
TEST_F(LedgerDirectory, FollowsTheGitSyncSymlinkAndItsSwapChangesTheSignature) {
  write(".worktrees/rev1/gpu-res-1.yaml", record("gpu-res-1"));
  write(".worktrees/rev2/gpu-res-2.yaml", record("gpu-res-2"));
  fs::create_directory_symlink(dir_ / ".worktrees/rev1", dir_ / "ledger");
  auto first = readLedgerDirectory(dir_ / "ledger");
  ASSERT_TRUE(first) << first.error().describe();
  ASSERT_EQ(first->ledger.records.size(), 1u);
  EXPECT_EQ(first->ledger.records[0].source, "gpu-res-1.yaml");
  EXPECT_EQ(first->ledger.records[0].state, model::ReservationState::Pending);
  auto unchanged = ledgerDirectorySignature(dir_ / "ledger");
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(*unchanged, first->signature);
  // The swap: a new link renamed over the old one, as git-sync does.
  fs::create_directory_symlink(dir_ / ".worktrees/rev2", dir_ / "ledger.new");
  fs::rename(dir_ / "ledger.new", dir_ / "ledger");
  auto swapped = ledgerDirectorySignature(dir_ / "ledger");
  ASSERT_TRUE(swapped);
  EXPECT_NE(*swapped, first->signature);
  auto second = readLedgerDirectory(dir_ / "ledger");
  ASSERT_TRUE(second);
  ASSERT_EQ(second->ledger.records.size(), 1u);
  EXPECT_EQ(second->ledger.records[0].id, "gpu-res-2");
  // The root itself: the link is followed, the hidden worktrees are not read twice.
  auto root = loadLedgerDirectory(dir_ / "ledger");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->records.size(), 1u);
}

TEST_F(LedgerDirectory, AnEditedFileChangesTheSignature) {
  write("gpu-res-1.yaml", record("gpu-res-1"));
  auto before = ledgerDirectorySignature(dir_);
  ASSERT_TRUE(before);
  write("gpu-res-1.yaml", record("gpu-res-1", "active") + "# edited\n");
  auto after = ledgerDirectorySignature(dir_);
  ASSERT_TRUE(after);
  EXPECT_NE(*before, *after);
  write("gpu-res-2.yaml", record("gpu-res-2"));
  auto added = ledgerDirectorySignature(dir_);
  ASSERT_TRUE(added);
  EXPECT_NE(*after, *added);
}

TEST_F(LedgerDirectory, AnUnreadableFileIsAnErrorNamingIt) {
  if (::geteuid() == 0) {
    // root reads any file: a dangling record symlink is the unreadable file instead.
    fs::create_symlink(dir_ / "nowhere.yaml", dir_ / "gpu-res-1.yaml");
    write("gpu-res-2.yaml", record("gpu-res-2"));
    auto read = readLedgerDirectory(dir_);
    ASSERT_TRUE(read);  // a dangling link is no regular file: not a record
    EXPECT_EQ(read->ledger.records.size(), 1u);
    fs::remove_all(dir_);
    auto gone = readLedgerDirectory(dir_);
    ASSERT_FALSE(gone);
    EXPECT_NE(gone.error().describe().find(dir_.string()), std::string::npos) << gone.error().describe();
    return;
  }
  write("gpu-res-1.yaml", record("gpu-res-1"));
  fs::permissions(dir_ / "gpu-res-1.yaml", fs::perms::none);
  auto read = readLedgerDirectory(dir_);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().describe().find("gpu-res-1.yaml"), std::string::npos) << read.error().describe();
}

}  // namespace
}  // namespace tally::codec
