// The usage recorder of the real tally-controller binary, two replicas,
// against a real kube-apiserver; a kwok node. A held device Bound for a while
// accrues count x elapsed unit-seconds; the leader is killed mid-way and the
// standby continues from the last `through` it finds, so the total is neither
// lost nor doubled; tallyctl usage reads the same lines as GET /usage. A day
// whose records pass the size of one ConfigMap is sealed and continues in its
// next part, found by the day label and read back as one.

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include <filesystem>
#include <fstream>

#include "harness.hpp"
#include "tally/codec/usage_records.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/controller/usage_plan.hpp"

namespace tally::runtime::e2e {
namespace {

constexpr const char* kConfiguration = "tally-usage-e2e";
constexpr int kUnits = 2;
constexpr auto kCheck = 500ms;  // --usage-check-interval
constexpr auto kFlush = 2s;     // --usage-interval

const std::vector<std::string> kUsageFlags = {"--binder-retry-interval=1s", "--usage-interval=2s",
                                              "--usage-check-interval=500ms"};

Replica* replicas[2] = {nullptr, nullptr};
// Both replicas behind one address, which the webhook configuration names
// from the start: when the leader dies no URL changes.
ReplicaService service;

Replica* leader() {
  const std::string holder = leaseHolder();
  for (Replica* r : replicas) {
    if (r && r->pid > 0 && r->identity == holder) return r;
  }
  return nullptr;
}

std::string phaseOf(const std::string& ns, const std::string& name) {
  int rc = 0;
  std::string out = kubectl("get gpudevice " + name + " -n " + ns + " -o jsonpath='{.status.phase}'", &rc);
  return rc == 0 ? out : "<gone>";
}

double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The unit-seconds of the holders whose name starts with `name`.
std::int64_t unitSecondsOf(const std::string& lines, const std::string& name) {
  auto buckets = codec::decodeUsageLines([&] {
    std::string usage;  // the usage lines only (windows are another type)
    std::istringstream in(lines);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("\"type\":\"usage\"") != std::string::npos) usage += line + "\n";
    }
    return usage;
  }());
  EXPECT_TRUE(buckets) << buckets.error().describe();
  std::int64_t total = 0;
  if (!buckets) return total;
  for (const auto& b : *buckets) {
    if (b.holder.name.starts_with(name)) total += b.unitSeconds;
  }
  return total;
}

class UsageEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "usage-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(cluster().up(name)) << "e2e/cluster/up --name " << name << " failed";
    int rc = 0;
    for (const char* ns : {"tally-system", "acme"}) {
      kubectl(std::string("create namespace ") + ns, &rc);
      ASSERT_EQ(rc, 0) << ns;
    }
    ASSERT_TRUE(gpuNodes("use-", 1, 4));
    applyYaml(gpuClass("h200", kH200, 4), &rc);
    ASSERT_EQ(rc, 0);
    replicas[0] = new Replica(startReplica("usage-a", kConfiguration, kUsageFlags));
    ASSERT_TRUE(eventually([] { return leaseHolder() == "usage-a"; })) << "usage-a never took the Lease";
    replicas[1] = new Replica(startReplica("usage-b", kConfiguration, kUsageFlags));
    ASSERT_TRUE(service.start({replicas[0], replicas[1]})) << "the proxy in front of both replicas did not start";
    applyYaml(shippedWebhooks(kConfiguration, service.port(), {{"gpudevices"}}), &rc);
    ASSERT_EQ(rc, 0);
    for (Replica* r : replicas) {
      ASSERT_TRUE(eventually([r] {
        return httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/readyz") == 200;
      })) << r->identity
          << " never became ready; log: " << r->log;
    }
    ASSERT_TRUE(eventually(gatesDecided)) << "the pool auditor published no gate for some GPUDeviceClass";
  }
  void TearDown() override {
    for (Replica* r : replicas) {
      if (r) stopReplica(*r, SIGTERM);
    }
    service.stop();
    cluster().down();
  }
};

::testing::Environment* const kEnvironment = ::testing::AddGlobalTestEnvironment(new UsageEnvironment);

TEST(Usage, AHeldDeviceAccruesCountTimesElapsedAcrossALeaderChangeAndTallyctlReadsTheSame) {
  const double started = wallSeconds();
  int rc = 0;
  applyYaml(device("acme", "held", "h200", kUnits), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return phaseOf("acme", "held") == "Bound"; })) << phaseOf("acme", "held");
  const double bound = wallSeconds();

  std::this_thread::sleep_for(8s);
  Replica* first = leader();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(stopReplica(*first, SIGKILL) != -1, true);
  Replica* second = first == replicas[0] ? replicas[1] : replicas[0];
  ASSERT_TRUE(eventually([second] { return leaseHolder() == second->identity; }, 30s))
      << "the standby never took the Lease";
  std::this_thread::sleep_for(6s);  // the held device accrues under the new leader

  // The release goes through the one address (nothing re-pointed); a call
  // the dead leader's broken connection failed is counted and sent again.
  std::string deleted;
  int failed = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    deleted = kubectl("delete gpudevice held -n acme --wait=false", &rc);
    if (rc == 0) break;
    ++failed;
    std::printf("  the delete failed (attempt %d): %s", attempt + 1, deleted.c_str());
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(rc, 0) << deleted;
  EXPECT_EQ(failed, 0) << "the delete failed after the leader died behind the one address";
  ASSERT_TRUE(eventually([] {
    std::string p = phaseOf("acme", "held");
    return p == "<gone>" || p == "Released";
  })) << phaseOf("acme", "held");
  const double released = wallSeconds();
  // The release is seen within a check; the flush that records it follows.
  std::this_thread::sleep_for(kFlush + 2 * kCheck + 1s);

  const std::string since = formatRfc3339(static_cast<std::int64_t>(started) - 7200);
  const std::string until = formatRfc3339(static_cast<std::int64_t>(released) + 7200);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(second->opsPort) + "/usage?since=" + since + "&until=" + until;
  const std::string endpoint = runCommand("curl -s --max-time 5 " + adminBearer() + " '" + url + "'", &rc);
  ASSERT_EQ(rc, 0) << endpoint;
  const std::int64_t recorded = unitSecondsOf(endpoint, "held");

  // count x the wall-clock time it was held. Each end is seen within a check
  // (plus a publication and the observer's own polling), timestamps are whole
  // seconds: that bounds the error, independent of how long the test ran.
  const double expected = kUnits * (released - bound);
  const double slack = kUnits * 2 * (std::chrono::duration<double>(kCheck).count() + 1.5);
  EXPECT_NEAR(static_cast<double>(recorded), expected, slack) << endpoint;
  // Not doubled across the leader change, not lost in it (either would be off by ~the gap or the total).
  EXPECT_LT(static_cast<double>(recorded), expected * 1.5);

  const std::string ctl = runCommand(std::string(TALLYCTL_BINARY) + " usage --kubeconfig=" + cluster().kubeconfig() +
                                         " --since=" + since + " --until=" + until,
                                     &rc);
  EXPECT_EQ(rc, 0) << ctl;
  EXPECT_EQ(ctl, endpoint);

  const std::string metrics = metricsOf(*second);
  EXPECT_NE(metrics.find("tally_controller_usage_flushes_total{result=\"ok\"}"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tally_controller_usage_unit_seconds_total{class=\"h200\"}"), std::string::npos);
  // /metrics asks for no credential (manifests/README.md, "Webhook callers"):
  // no series names the tenant or carries a namespace.
  for (const char* tenant : {"acme", "namespace=\""}) {
    EXPECT_EQ(metrics.find(tenant), std::string::npos) << "a metric names " << tenant;
  }
}

// Today's parts as the API server holds them, found by the day label.
std::vector<codec::UsageCheckpoint> partsOf(model::Timestamp day) {
  int rc = 0;
  const std::string out = kubectl("get configmaps -n tally-system -l " + std::string(codec::kUsageDayLabel) + "=" +
                                      codec::usageDayLabel(day) + " -o json",
                                  &rc);
  EXPECT_EQ(rc, 0) << out;
  auto page = codec::decodeUsageConfigMapList(out);
  EXPECT_TRUE(page) << page.error().describe();
  if (!page) return {};
  std::sort(page->items.begin(), page->items.end(), [](const auto& a, const auto& b) { return a.part < b.part; });
  return std::move(page->items);
}

std::string usageOf(const Replica& r, model::Timestamp since, model::Timestamp until, int* rc) {
  const std::string url = "http://127.0.0.1:" + std::to_string(r.opsPort) + "/usage?since=" + formatRfc3339(since) +
                          "&until=" + formatRfc3339(until);
  return runCommand("curl -s --max-time 5 " + adminBearer() + " '" + url + "'", rc);
}

TEST(Usage, ADayPastTheSizeOfOneConfigMapIsSealedAndContinuesInItsNextPartReadBackAsOne) {
  // The day must not end between the fill and the flush that finds it full: close to midnight (UTC), wait for it.
  if (auto t = static_cast<model::Timestamp>(wallSeconds()); model::dayOf(t + 120) != model::dayOf(t)) {
    std::this_thread::sleep_for(std::chrono::seconds(model::dayOf(t + 120) - t + 5));
    std::this_thread::sleep_for(kFlush + 2 * kCheck);  // the first flush of the new day creates its part
  }
  const auto now = static_cast<model::Timestamp>(wallSeconds());
  const model::Timestamp today = model::dayOf(now);
  // Fill today's part up to just under what one holds, as a day of many holders
  // would; pinned to the version read (a flush in between: read again).
  std::int64_t filled = 0;
  std::string replaced;
  ASSERT_TRUE(eventually([&] {
    auto parts = partsOf(today);
    if (parts.size() != 1) return false;
    const codec::UsageCheckpoint& part = parts[0];
    std::string usage = codec::usageLines(part.buckets);
    // Exactly `room`: less than one more line short of what a part holds.
    const std::size_t room = controller::kMaxUsageBytes - 100;
    auto filler = [&](const std::string& name) {
      return codec::usageLine({today, {model::HolderKind::Pod, "acme", name, "uid-filler", "h200", kH200, 1}, 3600}) +
             "\n";
    };
    std::int64_t lines = 0;
    for (;; ++lines) {
      std::string line = filler(fmt::format("filler-{:06}", lines));
      if (usage.size() + 2 * line.size() > room) break;
      usage += line;
    }
    const std::size_t pad = room - usage.size() - filler("filler-pad-").size();
    usage += filler("filler-pad-" + std::string(pad, 'x'));
    ++lines;
    if (usage.size() != room) return false;
    controller::UsageWrite w;
    w.name = part.name;
    w.day = part.day;
    w.part = part.part;
    w.resourceVersion = part.resourceVersion;
    w.through = part.through;
    w.usage = usage;
    const auto path =
        std::filesystem::temp_directory_path() / ("usage-e2e-fill-" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << controller::usageConfigMapBody("tally-system", w);
    int rc = 0;
    replaced = kubectl("replace -f " + path.string(), &rc);
    std::filesystem::remove(path);
    filled = lines * 3600;
    return rc == 0;
  })) << replaced;
  ASSERT_GT(filled, 0);

  // A new holder: the next flush adds its line, which the full part cannot take.
  int rc = 0;
  applyYaml(device("acme", "grower", "h200", kUnits), &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(eventually([] { return phaseOf("acme", "grower") == "Bound"; })) << phaseOf("acme", "grower");
  std::vector<codec::UsageCheckpoint> parts;
  ASSERT_TRUE(eventually([&] {
    parts = partsOf(today);
    return parts.size() == 2 && !parts[1].buckets.empty();
  })) << parts.size()
      << " parts, the first of " << (parts.empty() ? 0 : parts[0].bytes) << " bytes (filled " << filled
      << " unit-seconds); the leader's metrics: " << (leader() ? metricsOf(*leader()) : "no leader");
  EXPECT_EQ(parts[0].name, codec::usageConfigMapName(today));
  EXPECT_TRUE(parts[0].sealed);
  EXPECT_EQ(parts[1].name, codec::usageConfigMapName(today) + "-1");
  EXPECT_FALSE(parts[1].sealed);
  EXPECT_LE(parts[0].bytes, controller::kMaxUsageBytes);
  EXPECT_GT(parts[1].through.value_or(0), parts[0].through.value_or(0));

  // Read back as one, by the endpoint and by tallyctl alike.
  Replica* r = leader();
  ASSERT_NE(r, nullptr);
  const model::Timestamp since = today - model::kSecondsPerDay, until = now + 7200;
  const std::string endpoint = usageOf(*r, since, until, &rc);
  ASSERT_EQ(rc, 0) << endpoint;
  EXPECT_EQ(unitSecondsOf(endpoint, "filler-"), filled);
  EXPECT_GT(unitSecondsOf(endpoint, "grower"), 0);
  EXPECT_GT(unitSecondsOf(endpoint, "held"), 0);  // the first test's
  const std::string ctl = runCommand(std::string(TALLYCTL_BINARY) + " usage --kubeconfig=" + cluster().kubeconfig() +
                                         " --since=" + formatRfc3339(since) + " --until=" + formatRfc3339(until),
                                     &rc);
  EXPECT_EQ(rc, 0) << ctl;
  // The recorder may flush between the two reads: compare what is sealed, and the grower only to be there.
  EXPECT_EQ(unitSecondsOf(ctl, "filler-"), filled);
  EXPECT_EQ(unitSecondsOf(ctl, "held"), unitSecondsOf(endpoint, "held"));
  EXPECT_GT(unitSecondsOf(ctl, "grower"), 0);
  const std::string metrics = metricsOf(*r);
  EXPECT_NE(metrics.find("tally_controller_usage_flushes_total{result=\"sealed\"}"), std::string::npos) << metrics;
  kubectl("delete gpudevice grower -n acme --wait=false");
}

TEST(Usage, TheEndpointRefusesABadPeriod) {
  Replica* r = leader();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/usage?since=yesterday", adminBearer()),
            400);
  EXPECT_EQ(httpStatus("http://127.0.0.1:" + std::to_string(r->opsPort) + "/usage", adminBearer()), 400);
}

// Every tenant's billing windows are in the answer: only a user the API
// server authenticates and allows to get /usage (a nonResourceURLs grant)
// reads it. A tenant's service account token gets 403 until it is granted.
TEST(Usage, TheEndpointAnswersOnlyUsersAllowedToGetUsage) {
  Replica* r = leader();
  ASSERT_NE(r, nullptr);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(r->opsPort) + "/usage?since=2020-01-01T00:00:00Z&until=2020-01-02T00:00:00Z";
  EXPECT_EQ(httpStatus(url), 401) << "no token";
  EXPECT_EQ(httpStatus(url, "-H 'Authorization: Bearer not-a-token'"), 401);
  kubectl("create namespace usage-reader");
  kubectl("-n usage-reader create serviceaccount tenant");
  int rc = 0;
  std::string token = kubectl("-n usage-reader create token tenant --duration=10m", &rc);
  ASSERT_EQ(rc, 0) << token;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  const std::string bearer = "-H 'Authorization: Bearer " + token + "'";
  EXPECT_EQ(httpStatus(url, bearer), 403) << "a service account with no grant";
  kubectl("create clusterrole tally-usage-reader --verb=get --non-resource-url=/usage");
  kubectl(
      "create clusterrolebinding tally-usage-reader --clusterrole=tally-usage-reader "
      "--serviceaccount=usage-reader:tenant");
  // Decisions are remembered for --catalog-review-ttl (10 s by default).
  EXPECT_TRUE(eventually([&] { return httpStatus(url, bearer) == 200; }, 30s)) << httpStatus(url, bearer);
  EXPECT_EQ(httpStatus(url, adminBearer()), 200);
  kubectl("delete clusterrolebinding tally-usage-reader");
  kubectl("delete clusterrole tally-usage-reader");
}

}  // namespace
}  // namespace tally::runtime::e2e
