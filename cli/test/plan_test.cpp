// tallyctl plan end to end: a proposed change is judged by the invariant of
// every pool it touches, before anyone makes it.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace {

namespace fs = std::filesystem;

const std::string kExamples = TALLY_EXAMPLES_DIR;

struct Outcome {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string record(std::string_view id, std::string_view organization, int devices) {
  std::ostringstream text;
  text << "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: " << id
       << "\nspec:\n  organization: " << organization << "\n  project: \"\"\n  profileId: nvidia-h200-passthrough\n"
       << "  devices: " << devices << "\n  state: pending\n  requestedAt: \"2026-11-29T10:00:00Z\"\n"
       << "  startsAt: \"2026-12-01T00:00:00Z\"\n  addonId: gpu-h200-reserved\n  billingReference: OPS-2001\n";
  return text.str();
}

class TallyctlPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / ("tallyctl-plan-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome plan(const std::string& change) {
    const std::string command = std::string(TALLYCTL_BINARY) + " plan --snapshot " + kExamples +
                                "/snapshot.json --ledger " + kExamples + "/ledger --now 2026-11-30T00:00:00Z " +
                                change + " >" + (dir_ / "out").string() + " 2>" + (dir_ / "err").string();
    int status = std::system(command.c_str());
    Outcome outcome;
    outcome.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    outcome.out = read(dir_ / "out");
    outcome.err = read(dir_ / "err");
    return outcome;
  }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  static std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
};

TEST_F(TallyctlPlan, ActivationOfThePendingRecordCountsOnceAndIsPrintedForCommit) {
  std::string text = read(fs::path(kExamples) / "ledger" / "gpu-res-1077.yaml");
  auto swap = [&](std::string_view from, std::string_view to) { text.replace(text.find(from), from.size(), to); };
  swap("state: pending", "state: active");
  swap("    sre: \"\"", "    sre: sam@example.com");
  swap("  reason: awaiting sre approval",
       "  activatedAt: \"2026-12-15T00:00:00Z\"\n  evidenceRevision: evidence/gpu-res-1077\n  reason: active");
  auto file = write("gpu-res-1077.yaml", text);
  Outcome r = plan("--record " + file.string());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  // Still 4 reserved: the active revision replaces the pending one.
  EXPECT_NE(r.out.find("after   nvidia-h200-passthrough: healthy 16 >= reserved 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("record/gpu-res-1077=1 (active for globex)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("id: gpu-res-1077"), std::string::npos) << r.out;
}

TEST_F(TallyctlPlan, NewReservationWhileAnotherIsInFlightIsRefused) {
  auto file = write("new.yaml", record("gpu-res-2001", "globex", 1));
  Outcome r = plan("--record " + file.string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("TransactionInFlight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpu-res-1077"), std::string::npos) << r.out;
}

TEST_F(TallyctlPlan, ReservationBeyondHeadroomIsRefused) {
  auto file = write("big.yaml", record("gpu-res-2002", "globex", 7));
  Outcome r = plan("--record " + file.string() + " -o json");
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("\"allowed\":false"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("InvariantBroken"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"headroom\":-3"), std::string::npos) << r.out;
}

TEST_F(TallyctlPlan, InvalidRecordIsRefusedWithItsProblems) {
  std::string text = record("gpu-res-2003", "globex", 1);
  text.replace(text.find("OPS-2001"), 8, "\"0000:3b:00.0\"");
  auto file = write("pci.yaml", text);
  Outcome r = plan("--record " + file.string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("RecordForbiddenContent"), std::string::npos) << r.out;
}

TEST_F(TallyctlPlan, AddonReductionThatRepairsAPoolIsAllowed) {
  Outcome r = plan("--addon acme/gpu-a100-10c=2");
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("before  nvidia-a100-10c: healthy 8 >= reserved 0 + non-reserved hard quota 10"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("after   nvidia-a100-10c: healthy 8 >= reserved 0 + non-reserved hard quota 6"),
            std::string::npos)
      << r.out;
}

TEST_F(TallyctlPlan, ModeChangeOfANodeWithHoldersIsRefusedNamingThem) {
  Outcome r = plan("--node-mode gpu-h200-02=pod-hami");
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("ModeTransitionBlocked"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpudevice/acme-research/eval-gpu"), std::string::npos) << r.out;
}

TEST_F(TallyctlPlan, MalformedChangesExitTwo) {
  EXPECT_EQ(plan("--addon acme-gpu").exitCode, 2);
  EXPECT_EQ(plan("--node-mode gpu-h200-02=turbo").exitCode, 2);
  EXPECT_EQ(plan("").exitCode, 2);
  EXPECT_EQ(plan("--addon acme/x=1 --node-mode n=pod-hami").exitCode, 2);
  EXPECT_EQ(plan("--record " + (dir_ / "absent.yaml").string()).exitCode, 2);
}

TEST_F(TallyctlPlan, AMalformedChangeIsRefusedQuotingItAndSayingWhatIsWrong) {
  Outcome addon = plan("--addon acme/x=-3");
  EXPECT_EQ(addon.exitCode, 2);
  EXPECT_NE(addon.err.find(R"(--addon "acme/x=-3": quantity "-3" is not a whole number of 0 or more)"),
            std::string::npos)
      << addon.err;
  Outcome mode = plan("--node-mode gpu-h200-02=turbo");
  EXPECT_NE(mode.err.find(R"(--node-mode "gpu-h200-02=turbo": mode "turbo" is not a workload mode)"), std::string::npos)
      << mode.err;
  EXPECT_NE(plan("--node-mode =pod-hami").err.find("want <node>=<mode>"), std::string::npos);
}

}  // namespace
