// tallyctl options, audit and the choice of input, as the real binary runs
// them on the example snapshot (the live input runs in catalog_e2e_test).

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kExamples = TALLY_EXAMPLES_DIR;
const std::string kInput = "--snapshot " + kExamples + "/snapshot.json --now 2026-11-30T00:00:00Z";

struct Outcome {
  int exitCode = -1;
  std::string out, err;
};

class TallyctlCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / ("tallyctl-commands-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string slurp(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  Outcome run(const std::string& args, const std::string& env = "") {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command =
        env + " " + std::string(TALLYCTL_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  fs::path dir_;
};

TEST_F(TallyctlCommands, OptionsListsEveryClassWithTheDoorsReasons) {
  Outcome r = run("options -n globex-ml " + kInput + " --ledger " + kExamples + "/ledger");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("namespace globex-ml"), std::string::npos) << r.out;
  for (const char* cls : {"nvidia-a100-10c", "nvidia-h200-passthrough", "nvidia-v100-shared"}) {
    EXPECT_NE(r.out.find(cls), std::string::npos) << cls << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("[NotEntitled]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[BudgetExceeded] hierarchicalresourcequota globex/plan-quota"), std::string::npos) << r.out;
}

TEST_F(TallyctlCommands, OptionsAsJsonGivesTheLargestCount) {
  Outcome r = run("options -n globex-ml -o json " + kInput + " --ledger " + kExamples + "/ledger");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.rfind(R"({"namespace":"globex-ml","classes":[)", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(R"("class":"nvidia-h200-passthrough")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("largestCount":)"), std::string::npos) << r.out;
}

TEST_F(TallyctlCommands, OptionsNeedsANamespace) {
  Outcome r = run("options " + kInput);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--namespace"), std::string::npos) << r.err;
}

TEST_F(TallyctlCommands, AuditPrintsFindingsWithRemediesAndFailsWhenAPoolFails) {
  Outcome r = run("audit " + kInput + " --ledger " + kExamples + "/ledger");
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("FAILS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MultipleTransactions:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to clear: finish or cancel all but one"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(informational)"), std::string::npos) << r.out;
}

TEST_F(TallyctlCommands, AuditAsJsonCarriesTheRemedyOfEachFinding) {
  Outcome r = run("audit -o json " + kInput + " --ledger " + kExamples + "/ledger");
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_NE(r.out.find(R"("fails":true)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("remedy":")"), std::string::npos) << r.out;
}

TEST_F(TallyctlCommands, AuditWithoutALedgerFlagSaysWhichFlagIsMissing) {
  Outcome r = run("audit " + kInput);
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("LedgerNotConfigured:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("to clear: configure the reservation ledger on tally-controller, tally-extender and "
                       "tallyctl (--ledger-dir DIR or --ledger-configmap NAMESPACE/NAME)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("StaleCapacity"), std::string::npos) << r.out;
}

// The ConfigMap source is read live, from the cluster the controller watches.
TEST_F(TallyctlCommands, TheLedgerConfigMapIsReadLiveAndHasOneSource) {
  Outcome r = run("audit " + kInput + " --ledger-configmap kube-dc/gpu-reservation-ledger");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--snapshot excludes --ledger-configmap"), std::string::npos) << r.err;
  r = run("audit --kubeconfig k --ledger-dir d --ledger-configmap kube-dc/gpu-reservation-ledger");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
}

TEST_F(TallyctlCommands, SnapshotAndKubeconfigAreMutuallyExclusive) {
  Outcome r = run("report --snapshot x.json --kubeconfig y");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
}

TEST_F(TallyctlCommands, WithoutSnapshotOrKubeconfigTheInputIsNamed) {
  Outcome r = run("report", "env -u KUBECONFIG");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("give --snapshot FILE, or --kubeconfig FILE"), std::string::npos) << r.err;
}

TEST_F(TallyctlCommands, AnUnreachableClusterIsABadInputNamingWhatFailed) {
  std::ofstream(dir_ / "kubeconfig") << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "
                                        "\"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\n"
                                        "users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: "
                                        "{cluster: c, user: u}\ncurrent-context: x\n";
  Outcome r = run("report --kubeconfig " + (dir_ / "kubeconfig").string());
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("list nodes"), std::string::npos) << r.err;
}

}  // namespace
