// tallyctl end to end: the real binary on the example snapshot and on broken input.

#include <gtest/gtest.h>
#include <simdjson.h>
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
const std::string kNow = "--now 2026-11-30T00:00:00Z";

struct Outcome {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class Tallyctl : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / ("tallyctl-test-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome run(const std::string& args) {
    const fs::path out = dir_ / "stdout";
    const fs::path err = dir_ / "stderr";
    const std::string command = std::string(TALLYCTL_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
    int status = std::system(command.c_str());
    Outcome result;
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = slurp(out);
    result.err = slurp(err);
    return result;
  }

  fs::path write(const std::string& name, const std::string& text) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  std::string exampleReport(const std::string& extra = "") {
    return "report --snapshot " + kExamples + "/snapshot.json " + kNow + " " + extra;
  }

  fs::path dir_;
};

// The parsed JSON report, with lookups by pool and node name.
class ReportJson {
 public:
  explicit ReportJson(const std::string& text) : json_(text) {
    auto error = parser_.parse(json_).get(root_);
    EXPECT_FALSE(error) << "report is not JSON: " << text;
  }
  simdjson::dom::element pool(std::string_view name) { return find("pools", "pool", name); }
  simdjson::dom::element node(std::string_view name) { return find("nodes", "name", name); }
  simdjson::dom::element root() { return root_; }

 private:
  simdjson::dom::element find(const char* list, const char* key, std::string_view name) {
    for (simdjson::dom::element entry : root_[list].get_array()) {
      if (std::string_view(entry[key].get_string()) == name) return entry;
    }
    ADD_FAILURE() << "no " << list << " entry " << name;
    return {};
  }
  simdjson::padded_string json_;
  simdjson::dom::parser parser_;
  simdjson::dom::element root_;
};

std::int64_t number(simdjson::dom::element e, const char* key) { return e[key].get_int64(); }
bool flag(simdjson::dom::element e, const char* key) { return e[key].get_bool(); }

// A valid GPUReservationRecord in `state`, with the fields that state needs.
std::string ledgerRecord(std::string_view id, std::string_view state,
                         std::string_view pool = "nvidia-h200-passthrough") {
  std::string text = "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\nmetadata:\n  id: ";
  text.append(id).append("\nspec:\n  organization: acme\n  profileId: ").append(pool);
  text.append("\n  devices: 1\n  state: ").append(state);
  text +=
      "\n  requestedAt: \"2026-09-20T09:00:00Z\"\n  startsAt: \"2026-10-01T00:00:00Z\"\n"
      "  addonId: gpu-h200-reserved\n  billingReference: OPS-7\n";
  const bool activated = state == "active" || state == "releasing" || state == "released";
  if (activated) text += "  approvedBy:\n    product: pat@example.com\n    sre: sam@example.com\n";
  text += "status:\n";
  if (activated) text += "  activatedAt: \"2026-10-01T00:00:00Z\"\n  evidenceRevision: evidence/ops-7\n";
  if (state == "released") text += "  releasedAt: \"2026-11-01T00:00:00Z\"\n";
  text += "  reason: pilot\n";
  return text;
}

TEST_F(Tallyctl, ReportOnTheExampleShowsEachPoolsInvariant) {
  Outcome r = run(exampleReport("--ledger " + kExamples + "/ledger"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ReportJson report(r.out);

  auto h200 = report.pool("nvidia-h200-passthrough");
  EXPECT_EQ(number(h200, "healthySchedulableDevices"), 16);
  EXPECT_EQ(number(h200, "healthySchedulableUnits"), 16);
  // The active record (2), the pending one (1) and the releasing one (1) count;
  // the released one does not.
  EXPECT_EQ(number(h200, "reservedDevices"), 4);
  // Hard quota, not usage: acme 6 minus its 2 reserved add-on devices, globex 3.
  EXPECT_EQ(number(h200, "nonReservedHardQuota"), 7);
  EXPECT_EQ(number(h200, "spareDevices"), 1);
  EXPECT_EQ(number(h200, "headroom"), 4);
  EXPECT_TRUE(flag(h200, "invariantHolds"));
  // A pending and a releasing record: two transactions in flight in one pool.
  bool twoInFlight = false;
  for (simdjson::dom::element finding : h200["findings"].get_array()) {
    twoInFlight |= std::string_view(finding["code"].get_string()) == "MultipleTransactions";
  }
  EXPECT_TRUE(twoInFlight) << r.out;
  EXPECT_FALSE(flag(h200["gate"], "open"));

  auto a100 = report.pool("nvidia-a100-10c");
  EXPECT_EQ(number(a100, "healthySchedulableDevices"), 8);
  EXPECT_EQ(number(a100, "nonReservedHardQuota"), 10);
  EXPECT_EQ(number(a100, "headroom"), -3);
  EXPECT_FALSE(flag(a100, "invariantHolds"));
  EXPECT_EQ(std::string_view(a100["findings"].at(0)["code"].get_string()), "HardQuotaAboveCapacity");
  EXPECT_FALSE(flag(a100["gate"], "open"));

  auto shared = report.pool("nvidia-v100-shared");
  EXPECT_EQ(number(shared, "healthySchedulableDevices"), 2);
  EXPECT_EQ(number(shared, "healthySchedulableUnits"), 8);
  EXPECT_EQ(number(shared, "spareDevices"), 1);
  // Every figure of a shared pool's equation in one unit: shares.
  EXPECT_EQ(std::string_view(shared["quotaUnit"].get_string()), "shares");
  EXPECT_EQ(number(shared, "spareUnits"), 4);
  EXPECT_EQ(number(shared, "reservedUnits"), 0);
  EXPECT_EQ(std::string_view(a100["quotaUnit"].get_string()), "devices");
  EXPECT_TRUE(flag(shared, "invariantHolds"));
  EXPECT_TRUE(flag(shared["gate"], "open"));
}

TEST_F(Tallyctl, ReportPoolsCarryEveryPromisedField) {
  Outcome r = run(exampleReport("--ledger " + kExamples + "/ledger --output json"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ReportJson report(r.out);
  for (simdjson::dom::element pool : report.root()["pools"].get_array()) {
    for (const char* key : {"pool", "quotaUnit", "healthySchedulableDevices", "healthySchedulableUnits",
                            "reservedDevices", "reservedUnits", "nonReservedHardQuota", "spareDevices", "spareUnits",
                            "headroom", "invariantHolds", "findings", "gate", "equation"}) {
      EXPECT_FALSE(pool[key].error()) << key;
    }
  }
  for (simdjson::dom::element node : report.root()["nodes"].get_array()) {
    for (const char* key : {"name", "pool", "unitsServed", "unitsUsed", "unitsHeld", "unitsFree"}) {
      EXPECT_FALSE(node[key].error()) << key;
    }
  }
}

TEST_F(Tallyctl, ReportNodesShowServedUsedHeldAndFreeUnits) {
  Outcome r = run(exampleReport("--ledger " + kExamples + "/ledger"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ReportJson report(r.out);
  // The launcher listed in activePods is covered by its attached devices.
  auto h200a = report.node("gpu-h200-01");
  EXPECT_EQ(number(h200a, "unitsServed"), 8);
  EXPECT_EQ(number(h200a, "unitsHeld"), 2);
  EXPECT_EQ(number(h200a, "unitsUsed"), 2);
  EXPECT_EQ(number(h200a, "unitsFree"), 6);
  // A pod naming the VMI as owner but missing from activePods is raw usage.
  auto h200b = report.node("gpu-h200-02");
  EXPECT_EQ(number(h200b, "unitsHeld"), 1);
  EXPECT_EQ(number(h200b, "unitsUsed"), 2);
  // Cordoned, NotReady and switching nodes serve nothing; the Lost device holds nothing.
  for (const char* name : {"gpu-h200-03", "gpu-h200-04", "gpu-h200-05"}) {
    EXPECT_EQ(number(report.node(name), "unitsServed"), 0) << name;
  }
  EXPECT_EQ(number(report.node("gpu-h200-04"), "unitsHeld"), 0);
  // The unhealthy vGPU parent's slots do not count; the healthy parent's do.
  EXPECT_EQ(number(report.node("gpu-a100-01"), "unitsServed"), 4);
  // Shared: 2 healthy GPUs x 4 shares; the sidecar and app container add up to 2, plus 1.
  auto v100 = report.node("gpu-v100-01");
  EXPECT_EQ(number(v100, "unitsServed"), 8);
  EXPECT_EQ(number(v100, "unitsUsed"), 3);
  EXPECT_EQ(number(report.node("gpu-v100-02"), "unitsServed"), 0);
  EXPECT_EQ(std::string_view(report.node("cpu-01")["pool"].get_string()), "");
}

TEST_F(Tallyctl, ReportCountsSkippedKindsOnStderr) {
  Outcome r = run(exampleReport());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("skipped Service: 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("skipped Deployment: 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("skipped ConfigMap: 1"), std::string::npos) << r.err;
}

// No ledger flag is what a controller without --ledger-dir/--ledger-configmap
// publishes: no ledger is configured, which is not stale. Only the pool an
// organization holds a reservation add-on of fails, and it names the flags.
TEST_F(Tallyctl, WithoutALedgerFlagOnlyThePoolWithReservationAddonsFailsAndNamesTheFlags) {
  Outcome r = run(exampleReport());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ReportJson report(r.out);
  auto codes = [&](const char* name) {
    std::string out;
    for (simdjson::dom::element finding : report.pool(name)["findings"].get_array()) {
      out += std::string(finding["code"].get_string().value()) + ": " +
             std::string(finding["message"].get_string().value()) + "\n";
    }
    return out;
  };
  const std::string h200 = codes("nvidia-h200-passthrough");
  EXPECT_NE(h200.find("LedgerNotConfigured: organization acme holds reservation add-on gpu-h200-reserved"),
            std::string::npos)
      << h200;
  EXPECT_NE(h200.find("--ledger-dir or --ledger-configmap"), std::string::npos) << h200;
  EXPECT_FALSE(flag(report.pool("nvidia-h200-passthrough")["gate"], "open"));
  for (const char* name : {"nvidia-h200-passthrough", "nvidia-a100-10c", "nvidia-v100-shared"}) {
    const std::string found = codes(name);
    EXPECT_EQ(found.find("StaleCapacity"), std::string::npos) << name << ": " << found;
    EXPECT_EQ(found.find("ledger is unknown"), std::string::npos) << name << ": " << found;
  }
  EXPECT_EQ(codes("nvidia-a100-10c").find("Ledger"), std::string::npos) << codes("nvidia-a100-10c");
}

TEST_F(Tallyctl, TableOutputIsReadable) {
  Outcome r = run(exampleReport("--ledger " + kExamples + "/ledger -o table"));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("POOL"), std::string::npos);
  EXPECT_NE(r.out.find("BROKEN"), std::string::npos);
  EXPECT_NE(r.out.find("holds"), std::string::npos);
  EXPECT_NE(r.out.find("gpu-h200-03 is cordoned"), std::string::npos);
}

TEST_F(Tallyctl, BrokenFieldExitsTwoNamingItemAndField) {
  auto snapshot = write("broken.json", R"({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}},
    {"apiVersion": "gpu.tally.dev/v1alpha1", "kind": "GPUDevice", "metadata": {"name": "d", "namespace": "acme"},
     "spec": {"class": "c"}, "status": {"phase": "Vanished"}}]})");
  Outcome r = run("report --snapshot " + snapshot.string() + " " + kNow);
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("items[1] GPUDevice acme/d: status.phase: unknown phase \"Vanished\""), std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(Tallyctl, NotJsonExitsTwo) {
  auto snapshot = write("yaml.json", "apiVersion: v1\nkind: List\nitems: []\n");
  Outcome r = run("report --snapshot " + snapshot.string());
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("snapshot"), std::string::npos) << r.err;
}

TEST_F(Tallyctl, TruncatedSnapshotExitsTwo) {
  std::string text = slurp(kExamples + "/snapshot.json");
  auto snapshot = write("cut.json", text.substr(0, text.size() / 2));
  Outcome r = run("report --snapshot " + snapshot.string());
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST_F(Tallyctl, MissingSnapshotFileExitsTwo) {
  Outcome r = run("report --snapshot " + (dir_ / "absent.json").string());
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("cannot be opened"), std::string::npos) << r.err;
}

TEST_F(Tallyctl, BadFlagsExitTwo) {
  EXPECT_EQ(run("report").exitCode, 2);
  EXPECT_EQ(run(exampleReport("--output yaml")).exitCode, 2);
  Outcome r = run("report --snapshot " + kExamples + "/snapshot.json --now yesterday");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--now"), std::string::npos) << r.err;
  EXPECT_EQ(run("frobnicate").exitCode, 2);
}

TEST_F(Tallyctl, HelpExitsZero) { EXPECT_EQ(run("--help").exitCode, 0); }

TEST_F(Tallyctl, UsageOfASnapshotEndsOpenBillingWindowsAtItsMomentNotAtAFutureUntil) {
  Outcome r = run("usage --snapshot " + kExamples + "/snapshot.json --ledger " + kExamples + "/ledger " + kNow +
                  " --since 2026-11-29T00:00:00Z --until 2026-12-31T00:00:00Z");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int open = 0;
  while (std::getline(lines, line)) {
    if (line.find(R"("type":"window")") == std::string::npos || line.find(R"("open":true)") == std::string::npos) {
      continue;
    }
    ++open;
    EXPECT_NE(line.find(R"("until":"2026-11-30T00:00:00Z")"), std::string::npos) << line;
  }
  // gpu-res-1042 (active, 2 devices) and gpu-res-0990 (releasing, no releasedAt): one day each since 2026-11-29.
  EXPECT_EQ(open, 2) << r.out;
  EXPECT_NE(r.out.find(R"("id":"gpu-res-1042")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("deviceSeconds":172800)"), std::string::npos) << r.out;
}

TEST_F(Tallyctl, LedgerValidateOfTheExampleNamesItsTwoTransactionsInFlight) {
  // Every record of the example is valid, but a pending and a releasing record
  // share the H200 pool: the one ledger problem the example is there to show.
  Outcome r = run("ledger validate " + kExamples + "/ledger");
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("4 valid records, 0 invalid, 1 ledger problem"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpu-res-1077.yaml: gpu-res-1077: MultipleTransactions:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpu-res-0990"), std::string::npos) << r.out;
}

TEST_F(Tallyctl, LedgerValidateListsEveryProblemAndExitsOne) {
  write("ledger/pci.yaml", R"(apiVersion: operations.kube-dc.com/v1alpha1
kind: GPUReservationRecord
metadata:
  id: gpu-res-7
spec:
  organization: acme
  profileId: nvidia-h200-passthrough
  devices: 1
  state: pending
  requestedAt: "2026-09-20T09:00:00Z"
  startsAt: "2026-10-01T00:00:00Z"
  addonId: gpu-h200-reserved
  billingReference: "host 0000:3b:00.0"
)");
  write("ledger/state.yaml",
        "apiVersion: operations.kube-dc.com/v1alpha1\nkind: GPUReservationRecord\n"
        "metadata:\n  id: gpu-res-8\nspec:\n  state: exploded\n");
  Outcome r = run("ledger validate " + (dir_ / "ledger").string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("pci.yaml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("state.yaml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 valid records, 2 invalid"), std::string::npos) << r.out;
}

TEST_F(Tallyctl, LedgerValidateOfMissingDirectoryExitsTwo) {
  EXPECT_EQ(run("ledger validate " + (dir_ / "nope").string()).exitCode, 2);
}

TEST_F(Tallyctl, LedgerValidateAcceptsAHistoryAlongTheStateMachine) {
  write("before/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "pending"));
  write("before/gpu-res-2.yaml", ledgerRecord("gpu-res-2", "releasing", "nvidia-a100-passthrough"));
  write("after/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "active"));
  write("after/gpu-res-2.yaml", ledgerRecord("gpu-res-2", "released", "nvidia-a100-passthrough"));
  write("after/gpu-res-3.yaml", ledgerRecord("gpu-res-3", "pending"));
  Outcome r = run("ledger validate " + (dir_ / "after").string() + " --previous " + (dir_ / "before").string());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 valid records, 0 invalid, 0 ledger problems against the previous revision"),
            std::string::npos)
      << r.out;
}

TEST_F(Tallyctl, LedgerValidateRefusesAnActiveRecordGoingBackToPending) {
  write("before/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "active"));
  write("after/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "pending"));
  Outcome r = run("ledger validate " + (dir_ / "after").string() + " --previous " + (dir_ / "before").string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("gpu-res-1.yaml: gpu-res-1: Transition: record gpu-res-1: state may not change from active to "
                       "pending\n"),
            std::string::npos)
      << r.out;
}

TEST_F(Tallyctl, LedgerValidateRefusesARecordThatVanished) {
  write("before/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "released"));
  write("before/gpu-res-2.yaml", ledgerRecord("gpu-res-2", "active"));
  write("after/gpu-res-2.yaml", ledgerRecord("gpu-res-2", "active"));
  Outcome r = run("ledger validate " + (dir_ / "after").string() + " --previous " + (dir_ / "before").string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("gpu-res-1.yaml: gpu-res-1: Disappeared: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("gpu-res-2: Disappeared"), std::string::npos) << r.out;
}

TEST_F(Tallyctl, LedgerValidateRefusesADuplicateIdNamingBothFiles) {
  write("ledger/a.yaml", ledgerRecord("gpu-res-1", "active"));
  write("ledger/b.yaml", ledgerRecord("gpu-res-1", "released"));
  Outcome r = run("ledger validate " + (dir_ / "ledger").string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("b.yaml: gpu-res-1: DuplicateId: id gpu-res-1 is already recorded in a.yaml"), std::string::npos)
      << r.out;
}

TEST_F(Tallyctl, LedgerValidateRefusesTwoTransactionsInFlightInOnePool) {
  write("ledger/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "pending"));
  write("ledger/gpu-res-2.yaml", ledgerRecord("gpu-res-2", "releasing"));
  write("ledger/gpu-res-3.yaml", ledgerRecord("gpu-res-3", "pending", "nvidia-a100-passthrough"));
  Outcome r = run("ledger validate " + (dir_ / "ledger").string());
  EXPECT_EQ(r.exitCode, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("gpu-res-2.yaml: gpu-res-2: MultipleTransactions: releasing record in pool "
                       "nvidia-h200-passthrough while gpu-res-1 (pending, gpu-res-1.yaml) is still in flight"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("gpu-res-3: MultipleTransactions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 ledger problem\n"), std::string::npos) << r.out;
}

TEST_F(Tallyctl, LedgerValidateOfMissingPreviousDirectoryExitsTwo) {
  write("ledger/gpu-res-1.yaml", ledgerRecord("gpu-res-1", "pending"));
  Outcome r = run("ledger validate " + (dir_ / "ledger").string() + " --previous " + (dir_ / "nope").string());
  EXPECT_EQ(r.exitCode, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--previous"), std::string::npos) << r.err;
}

// The example snapshot with its billing plans kept in platform/plans.
std::string snapshotWithPlansAtPlatform() {
  std::string text = slurp(kExamples + "/snapshot.json");
  const std::string from = "\"name\": \"billing-plans\",\n        \"namespace\": \"kube-dc\"";
  const auto at = text.find(from);
  if (at == std::string::npos) return {};
  return text.replace(at, from.size(), "\"name\": \"plans\",\n        \"namespace\": \"platform\"");
}

bool hasFinding(simdjson::dom::element pool, std::string_view code) {
  for (simdjson::dom::element finding : pool["findings"].get_array()) {
    if (std::string_view(finding["code"].get_string()) == code) return true;
  }
  return false;
}

TEST_F(Tallyctl, ReportReadsTheBillingPlansFromTheConfiguredConfigMap) {
  const std::string text = snapshotWithPlansAtPlatform();
  ASSERT_FALSE(text.empty()) << "the example snapshot no longer has kube-dc/billing-plans";
  auto snapshot = write("platform.json", text);
  Outcome r = run("report --snapshot " + snapshot.string() + " --ledger " + kExamples + "/ledger " + kNow +
                  " --billing-plans platform/plans");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ReportJson report(r.out);
  EXPECT_FALSE(hasFinding(report.pool("nvidia-h200-passthrough"), "UnknownAddon")) << r.out;
  EXPECT_EQ(number(report.pool("nvidia-h200-passthrough"), "nonReservedHardQuota"), 7);
}

TEST_F(Tallyctl, ReportIgnoresBillingPlansInAConfigMapNotConfigured) {
  auto snapshot = write("platform.json", snapshotWithPlansAtPlatform());
  Outcome r = run("report --snapshot " + snapshot.string() + " --ledger " + kExamples + "/ledger " + kNow);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("skipped ConfigMap: 2"), std::string::npos) << r.err;
  ReportJson report(r.out);
  EXPECT_TRUE(hasFinding(report.pool("nvidia-h200-passthrough"), "UnknownAddon")) << r.out;
}

TEST_F(Tallyctl, MalformedBillingPlansFlagExitsTwo) {
  Outcome r = run(exampleReport("--billing-plans billing-plans"));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--billing-plans"), std::string::npos) << r.err;
}

}  // namespace
