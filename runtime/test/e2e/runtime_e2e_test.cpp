// The runtime against a real kube-apiserver (e2e/cluster/up): client verbs and
// typed errors, pagination, server-side apply, informers through restarts and
// 410s, the conflict helper across threads and processes, leader election.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "tally/runtime/testing/e2e/cluster.hpp"
#include "tally/common/thread_name.hpp"
#include "tally/runtime/conflict.hpp"
#include "tally/runtime/informer.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/lease.hpp"
#include "tally/runtime/testing/slim_pod.hpp"

namespace tally::runtime::e2e {
namespace {

using namespace std::chrono_literals;
using codecs::SlimPodCodec;

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string name = "rt-e2e-" + std::to_string(::getpid());
    ASSERT_TRUE(Cluster::instance().up(name)) << "e2e/cluster/up --name " << name << " failed";
  }
  void TearDown() override { Cluster::instance().down(); }
};

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

std::shared_ptr<Client> client() {
  auto c = Cluster::instance().client();
  EXPECT_NE(c, nullptr);
  return c;
}

void ensureNamespace(Client& c, const std::string& ns) {
  auto r = c.create(Resource::core("namespaces"),
                    R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":)" + jsonString(ns) + "}}");
  ASSERT_TRUE(r || r.error().is(ErrorCode::kAlreadyExists)) << r.error().describe();
}

std::string configMap(const std::string& name, const std::string& value, const std::string& labels = "{}") {
  return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":)" + jsonString(name) + R"(,"labels":)" + labels +
         R"(},"data":{"value":)" + jsonString(value) + "}}";
}

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

TEST(ClientCrud, ConfigMapLifecycleWithTypedErrors) {
  auto c = client();
  ensureNamespace(*c, "crud");
  const Resource cms = Resource::core("configmaps", "crud");
  auto created = c->create(cms, configMap("cm", "1"));
  ASSERT_TRUE(created) << created.error().describe();
  auto meta = decodeJsonObject<MetaCodec>(*created);
  ASSERT_TRUE(meta);

  auto dup = c->create(cms, configMap("cm", "1"));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(dup.error().httpStatus, 409);

  auto missing = c->get(cms, "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);

  // PUT with the current resourceVersion succeeds; the same stale one then conflicts.
  const std::string rv = meta->metadata.resourceVersion;
  auto body = [&](const std::string& value) {
    return R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","resourceVersion":)" + jsonString(rv) +
           R"(},"data":{"value":)" + jsonString(value) + "}}";
  };
  ASSERT_TRUE(c->update(cms, "cm", body("2")));
  auto stale = c->update(cms, "cm", body("3"));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict);

  auto invalid = c->create(cms, configMap("Not_A_Valid_Name", "x"));
  ASSERT_FALSE(invalid);
  EXPECT_EQ(invalid.error().code, ErrorCode::kInvalid);

  ASSERT_TRUE(c->patch(cms, "cm", PatchType::kMerge, R"({"data":{"merged":"yes"}})"));
  ASSERT_TRUE(c->patch(cms, "cm", PatchType::kJsonPatch, R"([{"op":"add","path":"/data/json","value":"yes"}])"));
  auto got = c->get(cms, "cm");
  ASSERT_TRUE(got);
  EXPECT_NE(got->find(R"("merged":"yes")"), std::string::npos);
  EXPECT_NE(got->find(R"("json":"yes")"), std::string::npos);

  DeleteOptions wrongUid;
  wrongUid.preconditionUid = "00000000-0000-0000-0000-000000000000";
  auto refused = c->remove(cms, "cm", wrongUid);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  DeleteOptions rightUid;
  rightUid.preconditionUid = meta->metadata.uid;
  ASSERT_TRUE(c->remove(cms, "cm", rightUid));
  EXPECT_EQ(c->get(cms, "cm").error().code, ErrorCode::kNotFound);
  EXPECT_LE(c->connectionsOpened(), 2u) << "requests reuse keep-alive connections";
}

// A connection opened after the first one resumes its TLS session (the API
// server issues tickets): no certificate exchange or signatures on either side.
TEST(ClientTls, LaterConnectionsResumeTheSession) {
  auto c = client();
  ensureNamespace(*c, "tls");
  const Resource cms = Resource::core("configmaps", "tls");
  ASSERT_TRUE(c->list(cms, ListOptions{}));  // a full handshake; the ticket comes with the first reply
  EXPECT_EQ(c->tlsResumptions(), 0u);
  EXPECT_EQ(c->tlsFullHandshakes(), c->connectionsOpened());
  const auto opened = c->connectionsOpened();
  auto stream = c->watch(cms, WatchOptions{});  // a watch always opens its own connection
  ASSERT_TRUE(stream) << stream.error().describe();
  EXPECT_EQ(c->connectionsOpened(), opened + 1);
  EXPECT_EQ(c->tlsResumptions(), 1u);
  EXPECT_EQ(c->tlsFullHandshakes(), opened);

  // The watch's connection got the newest ticket; it ends without a
  // close_notify (a watch is dropped, not shut down). The session it leaves
  // behind must stay resumable for the next connection.
  stream->reset();
  auto again = c->watch(cms, WatchOptions{});
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(c->tlsResumptions(), 2u);
  EXPECT_EQ(c->tlsFullHandshakes(), opened);
}

TEST(ClientCrud, CustomResourceWithStatusSubresource) {
  auto c = client();
  ensureNamespace(*c, "crd");
  const Resource hrqs = Resource::of("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas", "crd");
  auto created =
      c->create(hrqs, R"({"apiVersion":"hnc.x-k8s.io/v1alpha2","kind":"HierarchicalResourceQuota",)"
                      R"("metadata":{"name":"plan-quota"},"spec":{"hard":{"requests.nvidia.com/gpu":"8"}}})");
  ASSERT_TRUE(created) << created.error().describe();
  PatchOptions status;
  status.subresource = "status";
  auto st =
      c->patch(hrqs, "plan-quota", PatchType::kMerge, R"({"status":{"hard":{"requests.nvidia.com/gpu":"8"}}})", status);
  ASSERT_TRUE(st) << st.error().describe();
  auto got = c->get(hrqs, "plan-quota");
  ASSERT_TRUE(got);
  EXPECT_NE(got->find(R"("status":{"hard")"), std::string::npos);
  ASSERT_TRUE(c->remove(hrqs, "plan-quota"));
}

TEST(ClientPagination, ListFollowsContinueTokensAcrossPages) {
  auto c = client();
  ensureNamespace(*c, "pages");
  const Resource cms = Resource::core("configmaps", "pages");
  for (int i = 0; i < 25; ++i)
    ASSERT_TRUE(c->create(cms, configMap("cm-" + std::to_string(i), "v", R"({"page":"yes"})")));
  ListOptions lo;
  lo.limit = 10;
  lo.labelSelector = "page=yes";  // controllers may add their own configmaps
  int pages = 0;
  size_t items = 0;
  simdjson::ondemand::parser parser;
  do {
    auto resp = c->list(cms, lo);
    ASSERT_TRUE(resp) << resp.error().describe();
    auto page = decodeJsonList<MetaCodec>(parser, resp->body);
    ASSERT_TRUE(page);
    ++pages;
    items += page->items.size();
    lo.continueToken = page->continueToken;
  } while (!lo.continueToken.empty());
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(items, 25u);
}

TEST(ServerSideApply, FieldManagersOwnTheirKeysAndForceTakesOver) {
  auto c = client();
  ensureNamespace(*c, "ssa");
  const Resource cms = Resource::core("configmaps", "ssa");
  PatchOptions tally;
  tally.fieldManager = "tally";
  ASSERT_TRUE(c->patch(cms, "applied", PatchType::kApply,
                       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"gpu":"8"}})",
                       tally));
  PatchOptions other;
  other.fieldManager = "someone-else";
  auto conflict =
      c->patch(cms, "applied", PatchType::kApply,
               R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"gpu":"4"}})", other);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code, ErrorCode::kConflict);
  other.force = true;
  ASSERT_TRUE(c->patch(cms, "applied", PatchType::kApply,
                       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"gpu":"4"}})",
                       other));
  // Tally re-applies without the key it lost: the other manager's value stays.
  ASSERT_TRUE(c->patch(cms, "applied", PatchType::kApply,
                       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"own":"x"}})",
                       tally));
  auto got = c->get(cms, "applied");
  ASSERT_TRUE(got);
  EXPECT_NE(got->find(R"("gpu":"4")"), std::string::npos);
  EXPECT_NE(got->find(R"("own":"x")"), std::string::npos);
}

TEST(ClientPods, BindingStatusSubresourceAndEvents) {
  auto c = client();
  ensureNamespace(*c, "bind");
  const Resource pods = Resource::core("pods", "bind");
  auto created = c->create(pods, R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{)"
                                 R"("schedulerName":"nobody","containers":[{"name":"c","image":"x"}]}})");
  ASSERT_TRUE(created) << created.error().describe();
  auto pod = decodeJsonObject<SlimPodCodec>(*created);
  ASSERT_TRUE(pod);
  ASSERT_TRUE(c->bindPod("bind", "p", pod->metadata.uid, "some-node"));
  auto bound = decodeJsonObject<SlimPodCodec>(*c->get(pods, "p"));
  ASSERT_TRUE(bound);
  EXPECT_TRUE(bound->nodeName == "some-node");
  auto again = c->bindPod("bind", "p", pod->metadata.uid, "other-node");
  ASSERT_FALSE(again) << "a bound pod cannot be bound again";
  EXPECT_EQ(again.error().httpStatus, 409) << again.error().describe();
  // A retried bind to the node it already has is refused the same way: the
  // extender's binder reads the pod back to tell that success from a lost race.
  auto retried = c->bindPod("bind", "p", pod->metadata.uid, "some-node");
  ASSERT_FALSE(retried);
  EXPECT_EQ(retried.error().httpStatus, 409) << retried.error().describe();

  PatchOptions status;
  status.subresource = "status";
  ASSERT_TRUE(c->patch(pods, "p", PatchType::kMerge, R"({"status":{"phase":"Running"}})", status));
  EXPECT_TRUE(decodeJsonObject<SlimPodCodec>(*c->get(pods, "p"))->phase == "Running");

  EventRecord ev;
  ev.involved = {"v1", "Pod", "bind", "p", pod->metadata.uid};
  ev.reason = "Placed";
  ev.message = "placed on some-node by the runtime test";
  ev.reportingComponent = "tally-runtime-test";
  ASSERT_TRUE(c->createEvent(ev));
  auto events = c->list(Resource::core("events", "bind"), {});
  ASSERT_TRUE(events);
  EXPECT_NE(events->body.find("placed on some-node"), std::string::npos);
}

struct Recorder {
  std::mutex mu;
  std::vector<std::string> log;  // "ADD name value", ...
  std::map<std::string, std::string> values;
};

template <class Codec>
void record(Informer<Codec>& inf, Recorder& r) {
  inf.addHandlers({
      [&](const auto& o) {
        std::lock_guard lock(r.mu);
        r.log.push_back("ADD " + o.metadata.name + " " + std::string(Codec::resourceVersion(o)));
      },
      [&](const auto&, const auto& o) {
        std::lock_guard lock(r.mu);
        r.log.push_back("UPDATE " + o.metadata.name + " " + std::string(Codec::resourceVersion(o)));
      },
      [&](const auto& o) {
        std::lock_guard lock(r.mu);
        r.log.push_back("DELETE " + o.metadata.name);
      },
  });
}

// The final informer content equals a fresh LIST (names and resourceVersions).
template <class Codec>
void expectMatchesFreshList(Client& c, const Resource& res, const Informer<Codec>& inf,
                            const std::string& labelSelector = {}) {
  simdjson::ondemand::parser parser;
  ListOptions lo;
  lo.labelSelector = labelSelector;
  auto resp = c.list(res, lo);
  ASSERT_TRUE(resp);
  auto page = decodeJsonList<MetaCodec>(parser, resp->body);
  ASSERT_TRUE(page);
  std::map<std::string, std::string> listed;
  for (auto& o : page->items) listed[o.metadata.key()] = o.metadata.resourceVersion;
  std::map<std::string, std::string> cached;
  inf.snapshot()->forEach(
      [&](std::string_view key, const auto& o) { cached[std::string(key)] = std::string(Codec::resourceVersion(o)); });
  EXPECT_EQ(cached, listed);
}

class InformerWire : public ::testing::TestWithParam<std::pair<Wire, bool>> {};

// A thread of this process is called NAME (/proc/self/task/*/comm).
bool hasThreadNamed(std::string_view name) { return threadNamesOfThisProcess().contains(std::string(name)); }

TEST_P(InformerWire, SeesEveryChangeInOrder) {
  auto [wire, watchList] = GetParam();
  auto c = client();
  const std::string ns = std::string("order-") + (wire == Wire::kProtobuf ? "pb" : "json") + (watchList ? "-wl" : "");
  ensureNamespace(*c, ns);
  const Resource pods = Resource::core("pods", ns);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        c->create(pods, R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"pre-)" + std::to_string(i) +
                            R"("},"spec":{"schedulerName":"nobody","containers":[{"name":"c","image":"x"}]}})"));
  }
  InformerOptions opts;
  opts.resource = pods;
  opts.wire = wire;
  opts.useWatchList = watchList;
  opts.pageSize = 2;
  Informer<SlimPodCodec> inf(c, opts);
  Recorder rec;
  record(inf, rec);
  inf.start();
  ASSERT_TRUE(inf.waitForSync(20s));
  EXPECT_EQ(inf.snapshot()->size(), 5u);
  EXPECT_TRUE(hasThreadNamed("watch-pods")) << "the informer's thread is named after its resource";

  // 60 label updates on one pod, a create and a delete: all seen, in order.
  const Resource podsRes = pods;
  ASSERT_TRUE(c->create(
      podsRes,
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"hot"},"spec":{"schedulerName":"nobody","containers":[{"name":"c","image":"x"}]}})"));
  std::vector<std::string> rvs;
  for (int i = 0; i < 60; ++i) {
    auto r =
        c->patch(podsRes, "hot", PatchType::kMerge, R"({"metadata":{"labels":{"step":")" + std::to_string(i) + "\"}}}");
    ASSERT_TRUE(r);
    rvs.push_back(decodeJsonObject<MetaCodec>(*r)->metadata.resourceVersion);
  }
  ASSERT_TRUE(c->remove(podsRes, "pre-0", DeleteOptions{.gracePeriodSeconds = 0}));
  ASSERT_TRUE(eventually([&] {
    auto snap = inf.snapshot();
    return snap->get(ns + "/pre-0") == nullptr && snap->get(ns + "/hot") &&
           snap->get(ns + "/hot")->metadata.resourceVersion == rvs.back();
  }));
  std::vector<std::string> hotRvs;
  {
    std::lock_guard lock(rec.mu);
    for (auto& l : rec.log) {
      if (l.rfind("UPDATE hot ", 0) == 0) hotRvs.push_back(l.substr(11));
    }
    EXPECT_EQ(rec.log.back(), "DELETE pre-0");
  }
  EXPECT_EQ(hotRvs, rvs) << "every update of the hot pod, in order";
  expectMatchesFreshList(*c, pods, inf);
  EXPECT_LT(inf.staleness(), 30s);
  inf.stop();
}

INSTANTIATE_TEST_SUITE_P(Wires, InformerWire,
                         ::testing::Values(std::make_pair(Wire::kJson, false), std::make_pair(Wire::kProtobuf, false),
                                           std::make_pair(Wire::kJson, true), std::make_pair(Wire::kProtobuf, true)));

TEST(InformerRecovery, StaleResourceVersionAfterCompactionAndRestartIsGoneThenRelists) {
  auto c = client();
  ensureNamespace(*c, "gone");
  const Resource cms = Resource::core("configmaps", "gone");
  ASSERT_TRUE(c->create(cms, configMap("watched-0", "v", R"({"watched":"yes"})")));
  InformerOptions opts;
  opts.resource = cms;
  opts.labelSelector = "watched=yes";
  opts.backoffInitial = 200ms;
  opts.backoffMax = 1s;
  Informer<MetaCodec> inf(c, opts);
  inf.start();
  ASSERT_TRUE(inf.waitForSync(20s));
  const std::string syncedRv = inf.snapshot()->resourceVersion();

  // Move the store's revision past the informer's: writes it does not watch.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(c->create(cms, configMap("other-" + std::to_string(i), "v")));
  auto directClient = Cluster::instance().client();
  ASSERT_TRUE(Cluster::instance().compactEtcd());
  ASSERT_TRUE(Cluster::instance().restartApiserver());

  // A watch from the informer's old revision is now Gone...
  WatchOptions wo;
  wo.resourceVersion = syncedRv;
  wo.labelSelector = "watched=yes";
  auto stream = directClient->watch(cms, wo);
  bool gone = !stream && stream.error().is(ErrorCode::kGone);
  if (stream) {
    JsonWatchDecoder<MetaCodec> dec;
    for (int reads = 0; reads < 10 && !gone; ++reads) {
      auto bytes = (*stream)->read();
      if (!bytes || bytes->empty()) break;
      (void)dec.feed(*bytes, [&](WatchEvent<MetaObject>&& ev) {
        gone = gone || (ev.type == EventType::kError && ev.status.code == 410);
      });
    }
  }
  EXPECT_TRUE(gone) << "watch from a compacted resourceVersion must answer 410";

  // ...and the informer, whose watch broke with the restart, relists and converges.
  ASSERT_TRUE(c->create(cms, configMap("watched-1", "v", R"({"watched":"yes"})")));
  ASSERT_TRUE(eventually([&] { return inf.snapshot()->get("gone/watched-1") != nullptr; }, 40s));
  EXPECT_GE(inf.stats().gone, 1u) << "the resumed watch hit 410 and relisted";
  ListOptions lo;
  lo.labelSelector = "watched=yes";
  simdjson::ondemand::parser parser;
  auto page = decodeJsonList<MetaCodec>(parser, c->list(cms, lo)->body);
  ASSERT_TRUE(page);
  EXPECT_EQ(inf.snapshot()->size(), page->items.size());
  inf.stop();
}

TEST(InformerRecovery, ApiserverKilledMidWatchRecoversAndEqualsAFreshList) {
  auto c = client();
  ensureNamespace(*c, "restart");
  const Resource cms = Resource::core("configmaps", "restart");
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(c->create(cms, configMap("before-" + std::to_string(i), "v", R"({"mine":"yes"})")));
  InformerOptions opts;
  opts.resource = cms;
  opts.labelSelector = "mine=yes";
  opts.wire = Wire::kProtobuf;  // configmaps are built-in: protobuf watch
  opts.backoffInitial = 200ms;
  opts.backoffMax = 2s;
  Informer<MetaCodec> inf(c, opts);
  inf.start();
  ASSERT_TRUE(inf.waitForSync(20s));
  ASSERT_TRUE(Cluster::instance().killApiserver());
  std::this_thread::sleep_for(1s);  // the informer sees the failure and backs off
  ASSERT_TRUE(Cluster::instance().startApiserver());
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(c->create(cms, configMap("after-" + std::to_string(i), "v", R"({"mine":"yes"})")));
  ASSERT_TRUE(c->remove(cms, "before-3"));
  ASSERT_TRUE(
      eventually([&] { return inf.snapshot()->size() == 19u && !inf.snapshot()->get("restart/before-3"); }, 40s));
  expectMatchesFreshList(*c, cms, inf, "mine=yes");
  EXPECT_GE(inf.stats().watchErrors, 1u);
  inf.stop();
}

// ---- processes ----

struct Child {
  pid_t pid = -1;
  int out = -1;
  std::string buffer;
};

Child spawn(const std::vector<std::string>& args) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  Child c;
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  c.out = fds[0];
  return c;
}

std::string readAll(Child& c) {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.out, buf, sizeof buf)) > 0) c.buffer.append(buf, static_cast<size_t>(n));
  return c.buffer;
}

int waitExit(Child& c) {
  int st = 0;
  ::waitpid(c.pid, &st, 0);
  c.pid = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// Kills children still running when a test ends early.
struct Reaper {
  std::vector<Child>* children;
  ~Reaper() {
    for (auto& c : *children) {
      if (c.pid > 0 && ::waitpid(c.pid, nullptr, WNOHANG) == 0) {
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, nullptr, 0);
      }
    }
  }
};

int parseField(const std::string& out, const std::string& key) {
  const auto pos = out.rfind(key + "=");
  return pos == std::string::npos ? -1 : std::atoi(out.c_str() + pos + key.size() + 1);
}

TEST(ConflictHelper, ThreadsAndTwoProcessesIncrementOneCounterExactly) {
  auto c = client();
  ensureNamespace(*c, "counter");
  const Resource cms = Resource::core("configmaps", "counter");
  ASSERT_TRUE(c->create(
      cms,
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"counter","annotations":{"tally.dev/counter":"0"}}})"));
  constexpr int kThreads = 4;
  constexpr int kPerWorker = 25;
  std::vector<Child> procs;
  Reaper reaper{&procs};
  for (int p = 0; p < 2; ++p) {
    procs.push_back(spawn({TALLY_E2E_WORKER, "counter", Cluster::instance().kubeconfig(), "counter", "counter",
                           std::to_string(kPerWorker)}));
  }
  std::atomic<int> conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto own = Cluster::instance().client();
      for (int i = 0; i < kPerWorker; ++i) {
        ConflictStats stats;
        auto r = updateWithRetry<MetaCodec>(
            *own, cms, "counter",
            [](const MetaObject& cur) -> Result<std::optional<JsonPatch>> {
              const std::string* v = cur.metadata.annotation("tally.dev/counter");
              const int n = v ? std::stoi(*v) : 0;
              JsonPatch p;
              p.replace(JsonPatch::pointer({"metadata", "annotations", "tally.dev/counter"}),
                        jsonString(std::to_string(n + 1)));
              return std::optional<JsonPatch>(std::move(p));
            },
            1000, &stats);
        EXPECT_TRUE(r) << r.error().describe();
        conflicts += stats.conflicts;
      }
    });
  }
  for (auto& t : threads) t.join();
  int processConflicts = 0;
  for (auto& p : procs) {
    const std::string out = readAll(p);
    EXPECT_EQ(waitExit(p), 0) << out;
    processConflicts += std::max(0, parseField(out, "conflicts"));
  }
  auto final = decodeJsonObject<MetaCodec>(*c->get(cms, "counter"));
  ASSERT_TRUE(final);
  EXPECT_EQ(*final->metadata.annotation("tally.dev/counter"), std::to_string((kThreads + 2) * kPerWorker));
  std::printf("conflict helper: %d increments, %d conflicts in threads, %d in processes\n", (kThreads + 2) * kPerWorker,
              conflicts.load(), processConflicts);
  EXPECT_GT(conflicts.load() + processConflicts, 0) << "contention must have produced 409s";
}

TEST(LeaderElection, TwoProcessesOneLeadsAndTheOtherTakesOverWithinTheLeaseDuration) {
  auto c = client();
  ensureNamespace(*c, "leader");
  std::vector<Child> procs;
  Reaper reaper{&procs};
  for (const char* id : {"candidate-a", "candidate-b"}) {
    procs.push_back(spawn({TALLY_E2E_WORKER, "lease", Cluster::instance().kubeconfig(), "leader", "tally-test", id}));
  }
  auto holder = [&]() -> std::string {
    auto body = c->get(leaseResource("leader"), "tally-test");
    if (!body) return {};
    auto lease = decodeJsonObject<LeaseCodec>(*body);
    return lease ? lease->holderIdentity : std::string();
  };
  ASSERT_TRUE(eventually([&] { return !holder().empty(); }, 20s));
  const std::string first = holder();
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(holder(), first) << "the leader keeps renewing; the other never takes it";

  // Kill the leader hard (no release): the other must lead within the lease duration (4 s) plus a retry.
  Child& leader = first == "candidate-a" ? procs[0] : procs[1];
  Child& other = first == "candidate-a" ? procs[1] : procs[0];
  const auto killedAt = std::chrono::steady_clock::now();
  ::kill(leader.pid, SIGKILL);
  waitExit(leader);
  ASSERT_TRUE(eventually([&] { return !holder().empty() && holder() != first; }, 15s));
  const auto takeover = std::chrono::steady_clock::now() - killedAt;
  EXPECT_LT(takeover, 4s + 2s) << "taken over after "
                               << std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count() << " ms";
  std::printf("leader election: takeover %lld ms after killing the leader\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()));

  // Graceful stop releases the lease at once.
  ::kill(other.pid, SIGTERM);
  EXPECT_EQ(waitExit(other), 0);
  EXPECT_EQ(holder(), "") << "released on shutdown";
}

// A reconciler that mirrors an HRQ's spec.hard into status.hard, as a status
// writer would: it reads the object fresh, writes status pinned to the
// resourceVersion it read, and on 409 leaves the retry to the controller,
// which reads again. The first attempt meets a competing write on purpose.
TEST(Controllers, ReconcileWritesStatusWithTheResourceVersionAndRetriesAConflictOnAFreshRead) {
  auto c = client();
  ensureNamespace(*c, "ctl");
  const Resource hrqs = Resource::of("hnc.x-k8s.io", "v1alpha2", "hierarchicalresourcequotas", "ctl");
  observability::Registry registry;
  ManagerOptions mo;
  mo.metrics = &registry;
  Manager manager(c, mo);
  InformerOptions io;
  io.resource = hrqs;
  auto& informer = manager.informer<MetaCodec>(io);
  std::atomic<int> attempts{0}, conflicts{0};
  ControllerOptions co;
  co.name = "hrq-status";
  co.rateLimits.itemBase = 10ms;
  auto& controller = manager.controller(co, [&](const std::string& key, std::stop_token) -> Result<ReconcileResult> {
    const std::string name = key.substr(key.find('/') + 1);
    auto body = c->get(hrqs, name);
    if (!body)
      return body.error().is(ErrorCode::kNotFound) ? Result<ReconcileResult>(ReconcileResult::done())
                                                   : Result<ReconcileResult>(std::move(body).error());
    simdjson::ondemand::parser parser;
    simdjson::padded_string padded(*body);
    auto doc = parser.iterate(padded);
    std::string_view rv, hard;
    if (doc["metadata"]["resourceVersion"].get_string().get(rv) != simdjson::SUCCESS) {
      return Error{ErrorCode::kDecode, "no resourceVersion"};
    }
    std::string rvCopy(rv);
    simdjson::ondemand::object hardObject;
    if (doc["spec"]["hard"].get_object().get(hardObject) != simdjson::SUCCESS ||
        hardObject.raw_json().get(hard) != simdjson::SUCCESS)
      return Error{ErrorCode::kDecode, "no spec.hard"};
    std::string hardCopy(hard);
    if (++attempts == 1) {
      // Someone else writes between our read and our write.
      auto other = c->patch(hrqs, name, PatchType::kMerge, R"({"spec":{"hard":{"requests.nvidia.com/gpu":"12"}}})");
      if (!other) return std::move(other).error();
    }
    std::string status =
        R"({"apiVersion":"hnc.x-k8s.io/v1alpha2","kind":"HierarchicalResourceQuota","metadata":{"name":)" +
        jsonString(name) + R"(,"namespace":"ctl","resourceVersion":)" + jsonString(rvCopy) + R"(},"spec":{"hard":)" +
        hardCopy + R"(},"status":{"hard":)" + hardCopy + "}}";
    auto written = c->updateStatus(hrqs, name, status);
    if (!written) {
      if (written.error().is(ErrorCode::kConflict)) ++conflicts;
      return std::move(written).error();
    }
    return ReconcileResult::done();
  });
  controller.watch(informer);
  std::stop_source stop;
  std::jthread running([&] { EXPECT_TRUE(manager.run(stop.get_token())); });
  ASSERT_TRUE(eventually([&] { return manager.synced(); }));
  ASSERT_TRUE(c->create(hrqs, R"({"apiVersion":"hnc.x-k8s.io/v1alpha2","kind":"HierarchicalResourceQuota",)"
                              R"("metadata":{"name":"plan-quota"},"spec":{"hard":{"requests.nvidia.com/gpu":"8"}}})"));
  auto statusHard = [&]() -> std::string {
    auto body = c->get(hrqs, "plan-quota");
    if (!body) return {};
    const std::string marker = R"("status":{"hard":{"requests.nvidia.com/gpu":")";
    auto at = body->find(marker);
    if (at == std::string::npos) return {};
    at += marker.size();
    return body->substr(at, body->find('"', at) - at);
  };
  ASSERT_TRUE(eventually([&] { return statusHard() == "12"; }, 20s)) << "status: " << statusHard();
  EXPECT_EQ(conflicts.load(), 1) << "the stale write was refused by its resourceVersion";
  EXPECT_GE(attempts.load(), 2);
  EXPECT_GE(controller.stats().errors, 1u);
  const std::string metrics = registry.render();
  EXPECT_NE(metrics.find("controller_runtime_reconcile_errors_total{controller=\"hrq-status\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tally_informer_synced{resource=\"hierarchicalresourcequotas\"} 1"), std::string::npos)
      << metrics;
  stop.request_stop();
  running.join();
  EXPECT_FALSE(manager.synced());
  ASSERT_TRUE(c->remove(hrqs, "plan-quota"));
}

// Two processes run the same Manager: only the Lease holder's controller
// writes; killed, the other takes over within the lease duration and its new
// term reconciles every object again; SIGTERM stops it cleanly and releases the Lease.
TEST(Controllers, LeaderOnlyControllerMovesToTheOtherProcessWhenTheLeaderDies) {
  auto c = client();
  ensureNamespace(*c, "handover");
  const Resource cms = Resource::core("configmaps", "handover");
  std::vector<Child> procs;
  Reaper reaper{&procs};
  for (const char* id : {"replica-a", "replica-b"}) {
    procs.push_back(
        spawn({TALLY_E2E_WORKER, "manager", Cluster::instance().kubeconfig(), "handover", "tally-ctl", id}));
  }
  auto holder = [&]() -> std::string {
    auto body = c->get(leaseResource("handover"), "tally-ctl");
    if (!body) return {};
    auto lease = decodeJsonObject<LeaseCodec>(*body);
    return lease ? lease->holderIdentity : std::string();
  };
  auto stampOf = [&](const std::string& name) -> std::string {
    auto body = c->get(cms, name);
    if (!body) return {};
    auto cm = decodeJsonObject<MetaCodec>(*body);
    const std::string* v = cm ? cm->metadata.annotation("tally.dev/reconciled-by") : nullptr;
    return v ? *v : std::string();
  };
  ASSERT_TRUE(eventually([&] { return !holder().empty(); }, 20s));
  const std::string first = holder();
  ASSERT_TRUE(c->create(cms, configMap("one", "1")));
  ASSERT_TRUE(eventually([&] { return stampOf("one") == first; }, 20s)) << "stamp: " << stampOf("one");
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(stampOf("one"), first) << "the standby never writes";

  Child& leader = first == "replica-a" ? procs[0] : procs[1];
  Child& other = first == "replica-a" ? procs[1] : procs[0];
  const std::string second = first == "replica-a" ? "replica-b" : "replica-a";
  const auto killedAt = std::chrono::steady_clock::now();
  ::kill(leader.pid, SIGKILL);
  waitExit(leader);
  ASSERT_TRUE(c->create(cms, configMap("two", "2")));
  ASSERT_TRUE(eventually([&] { return stampOf("two") == second; }, 20s)) << "stamp: " << stampOf("two");
  const auto takeover = std::chrono::steady_clock::now() - killedAt;
  EXPECT_LT(takeover, 4s + 3s);
  EXPECT_TRUE(eventually([&] { return stampOf("one") == second; }, 10s))
      << "a new term reconciles what the cache holds, not only new events";
  std::printf("controller handover: %lld ms from killing the leader to the first write of the new one\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(takeover).count()));

  ::kill(other.pid, SIGTERM);
  EXPECT_EQ(waitExit(other), 0);
  EXPECT_NE(readAll(other).find("STOPPED by signal 15"), std::string::npos);
  EXPECT_EQ(holder(), "") << "released on shutdown";
}

}  // namespace
}  // namespace tally::runtime::e2e
