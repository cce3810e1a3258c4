#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <thread>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/runtime/http/testing/certificate.hpp"
#include "tally/runtime/http/testing/client.hpp"
#include "tally/common/thread_name.hpp"
#include "tally/extender/service.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;
using namespace tally::model::testing;
using tally::runtime::http::testing::TestClient;

namespace {

std::vector<state::Object> cluster() {
  return {passthroughClass(), ns("tenant-a"), gpuNode("free"),
          gpuNode("small", model::NodeMode::VmPassthrough, kH200, 1), gpuPod("tenant-a", "pending", kH200, 4)};
}

// A running extender on a loopback ephemeral port over a synthetic snapshot.
struct Harness {
  std::unique_ptr<CacheWriter> writer;
  observability::Registry registry;
  ExtenderMetrics metrics{registry};
  std::unique_ptr<PodBinder> binder;
  std::unique_ptr<ExtenderService> service;
  std::unique_ptr<http::Server> server;
  std::atomic<int> posts{0};
  std::string postError;
  std::chrono::milliseconds postDelay{0};

  explicit Harness(http::ServerOptions options = serverOptions(), std::unique_ptr<CacheWriter> w = nullptr,
                   ServiceOptions serviceOptions = {}) {
    writer = w ? std::move(w) : loadedWriter(cluster());
    writer->start();
    binder = std::make_unique<PodBinder>(
        *writer,
        [this](const wire::BindingArgs&) {
          ++posts;
          std::this_thread::sleep_for(postDelay);
          return postError;
        },
        PodBinder::Options{});
    service = std::make_unique<ExtenderService>(writer->snapshots(), metrics, serviceOptions, binder.get());
    http::Router router;
    service->addVerbRoutes(router);
    service->addOperationRoutes(router);
    server = std::make_unique<http::Server>(options, std::move(router), service->observer());
    server->start();
  }
  ~Harness() {
    server->stop();
    binder->stop();
    writer->stop();
  }
  std::uint16_t port() const { return server->port(); }
};

std::string filterBody(const std::vector<std::string>& nodes, std::int64_t count = 2) {
  return extenderArgs(podJson("tenant-a", "new", "uid-new", count), nodes);
}

}  // namespace

TEST(Http, FilterAnswersWithNodeNamesAndFailedNodes) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", filterBody({"free", "small"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("NodeNames":["free"])"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("FailedNodes":{"small":)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("Error":"")"), std::string::npos);
}

// A name sent with JSON escapes comes back escaped the same way, in the
// failures and in the passed names alike.
TEST(Http, FilterAnswersEscapedNamesEscaped) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", filterBody({R"(fr\u0065e)", R"(new\"node)"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"Nodes":null,"NodeNames":["free"],"FailedNodes":{"new\"node":)"
                    R"("node new\"node is not in tally-extender's cache yet"},"FailedAndUnresolvableNodes":{},)"
                    R"("Error":""})");
}

TEST(Http, FilterWithFullNodeListAnswersWithNodeObjects) {
  Harness h;
  TestClient c(h.port());
  auto r =
      c.send("POST", "/tally/filter", extenderArgsWithNodeList(podJson("tenant-a", "new", "uid-new", 2), {"free"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("Nodes":{"metadata":{},"items":[{"metadata":{"name":"free")"), std::string::npos) << r.body;
}

TEST(Http, PrioritizeAnswersWithHostPriorityList) {
  Harness h;
  TestClient c(h.port());
  // "small" fills up exactly (bin-packing's best); breaking into the untouched
  // "free" scores 0, which goes unlisted: kube-scheduler adds nothing for it either way.
  auto r = c.send("POST", "/tally/prioritize", filterBody({"free", "small"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"([{"Host":"small","Score":10}])") << r.body;
}

// kube-scheduler's prioritize of a cycle (the pod its filter saw, over exactly
// the nodes that filter passed) is answered from the filter's scores; any
// other prioritize is scored anew. Both give the same answer here, and the
// metric tells them apart.
TEST(Http, PrioritizeAfterItsFilterAnswersFromTheFilter) {
  Harness h;
  TestClient c(h.port());
  const std::string body = extenderArgs(podJson("tenant-a", "new", "uid-new", 1), {"free", "small"});
  auto f = c.send("POST", "/tally/filter", body);
  ASSERT_EQ(f.status, 200);
  ASSERT_NE(f.body.find(R"("NodeNames":["free","small"])"), std::string::npos) << f.body;
  auto p = c.send("POST", "/tally/prioritize", body);
  EXPECT_EQ(p.status, 200);
  EXPECT_EQ(p.body, R"([{"Host":"small","Score":10}])");
  auto m = c.send("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(tally_extender_prioritize_answers_total{source="filter"} 1)"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find(R"(tally_extender_prioritize_answers_total{source="snapshot"} 0)"), std::string::npos);

  // Another order, another pod: scored anew, to the same answer.
  auto reordered =
      c.send("POST", "/tally/prioritize", extenderArgs(podJson("tenant-a", "new", "uid-new", 1), {"small", "free"}));
  EXPECT_EQ(reordered.body, R"([{"Host":"small","Score":10}])");
  auto otherPod = c.send("POST", "/tally/prioritize",
                         extenderArgs(podJson("tenant-a", "other", "uid-other", 1), {"free", "small"}));
  EXPECT_EQ(otherPod.body, R"([{"Host":"small","Score":10}])");
  m = c.send("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(tally_extender_prioritize_answers_total{source="filter"} 1)"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find(R"(tally_extender_prioritize_answers_total{source="snapshot"} 2)"), std::string::npos);
}

TEST(Http, UnknownPathIs404WrongMethodIs405) {
  Harness h;
  TestClient c(h.port());
  auto missing = c.send("POST", "/tally/unknown", "{}");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, R"({"Error":"no such path: /tally/unknown"})");
  auto r = c.send("GET", "/tally/filter");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "POST");
  EXPECT_EQ(r.body, R"({"Error":"GET is not allowed on /tally/filter"})");
  EXPECT_EQ(c.send("POST", "/healthz").status, 405);
  auto m = c.send("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(tally_extender_bad_requests_total{kind="not_found"} 1)"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find(R"(tally_extender_bad_requests_total{kind="method_not_allowed"} 2)"), std::string::npos);
}

TEST(Http, MalformedJsonIs400WithAnErrorAndIsCounted) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", R"({"Pod": {"metadata": )");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.rfind(R"({"Error":"ExtenderArgs)", 0), 0u) << r.body;
  auto m = c.send("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(tally_extender_bad_requests_total{kind="json"} 1)"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find(R"(tally_extender_requests_total{code="400",route="filter"} 1)"), std::string::npos);
}

TEST(Http, BodyOverTheLimitIs413) {
  http::ServerOptions o = serverOptions();
  o.maxBodyBytes = 1024;
  Harness h(o);
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", std::string(4096, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_FALSE(r.keepAlive);
  EXPECT_EQ(r.body, R"({"Error":"request body exceeds the limit of 1024 bytes"})");
}

TEST(Http, NotSyncedFilterIsAnErrorAndReadyzFails) {
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;  // tenants in bare namespaces
  o.watched = {model::Kind::Pod};
  auto writer = std::make_unique<CacheWriter>(o);
  for (auto& obj : cluster()) writer->upsert(obj);
  writer->flush();
  Harness h(serverOptions(), std::move(writer));
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", filterBody({"free"}));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(R"("NodeNames":[])"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("the Pod cache is not synced"), std::string::npos) << r.body;
  EXPECT_EQ(c.send("GET", "/readyz").status, 503);
  EXPECT_EQ(c.send("GET", "/healthz").status, 200);
}

TEST(Http, BindRecordsTheAssumptionBeforeThePostAndTheNextFilterSeesIt) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind",
                  R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-pending","Node":"free"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"Error":""})");
  EXPECT_EQ(h.posts.load(), 1);
  auto f = c.send("POST", "/tally/filter", filterBody({"free"}, 5));
  EXPECT_NE(f.body.find(R"("NodeNames":[])"), std::string::npos) << f.body;
  EXPECT_NE(f.body.find("with 4 of 8"), std::string::npos) << f.body;
}

TEST(Http, BindWithoutAPodUidIsRefusedAndPostsNothing) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind", R"({"PodName":"pending","PodNamespace":"tenant-a","Node":"free"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("PodUID is required"), std::string::npos) << r.body;
  r = c.send("POST", "/tally/bind", R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"","Node":"free"})");
  EXPECT_EQ(r.status, 400) << r.body;
  // A UID that is not the cached pod's is not bound either.
  r = c.send("POST", "/tally/bind",
             R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-other","Node":"free"})");
  EXPECT_NE(r.body.find("has not seen pod tenant-a/pending"), std::string::npos) << r.body;
  EXPECT_EQ(h.posts.load(), 0);
}

// The verbs over mutual TLS, as kube-scheduler calls them with
// extenders[].tlsConfig: a caller without kube-scheduler's certificate gets
// 401 (none) or 403 (another name) and binds nothing; the probes still answer
// anyone; the scheduler's certificate binds.
TEST(Http, OverMutualTlsOnlyTheSchedulersCertificateReachesTheVerbs) {
  namespace rt = tally::runtime::http::testing;
  rt::TempDir dir;
  const rt::TestCertificate ca = rt::makeCa("tally-test-ca");
  const rt::TestCertificate serving = rt::makeSignedCertificate(ca, "tally-extender", rt::Use::Server);
  rt::replaceFile(dir.path / "tls.crt", serving.certPem);
  rt::replaceFile(dir.path / "tls.key", serving.keyPem);
  rt::replaceFile(dir.path / "ca.crt", ca.certPem);
  http::ServerOptions o = serverOptions();
  o.tls = http::TlsFiles{.certFile = (dir.path / "tls.crt").string(),
                         .keyFile = (dir.path / "tls.key").string(),
                         .clients = http::ClientCertificates{(dir.path / "ca.crt").string(), {"tally-scheduler"}}};
  ServiceOptions so;
  so.verbCallers = http::Caller::VerifiedClient;
  Harness h(o, nullptr, so);
  const std::string bind = R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-pending","Node":"free"})";

  rt::TlsClient anonymous(h.port());
  auto r = anonymous.send("POST", "/tally/bind", bind);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(anonymous.send("POST", "/tally/filter", filterBody({"free"})).status, 401);
  EXPECT_EQ(anonymous.send("GET", "/healthz").status, 200);
  const rt::TestCertificate tenant = rt::makeSignedCertificate(ca, "tenant-a", rt::Use::Client);
  rt::TlsClient other(h.port(), rt::TlsClient::Options{0, {}, tenant.certPem, tenant.keyPem});
  EXPECT_EQ(other.send("POST", "/tally/bind", bind).status, 403);
  EXPECT_EQ(h.posts.load(), 0) << "a bind from a caller without the scheduler's certificate was posted";

  const rt::TestCertificate scheduler = rt::makeSignedCertificate(ca, "tally-scheduler", rt::Use::Client);
  rt::TlsClient kubeScheduler(h.port(), rt::TlsClient::Options{0, {}, scheduler.certPem, scheduler.keyPem});
  r = kubeScheduler.send("POST", "/tally/bind", bind);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"Error":""})");
  EXPECT_EQ(h.posts.load(), 1);
}

// Operators tell a slow API server from a slow cache by the phase a bind spends
// its time in.
TEST(Http, BindReportsTheTimeOfEachPhase) {
  Harness h;
  h.postDelay = std::chrono::milliseconds(60);
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind",
                  R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-pending","Node":"free"})");
  ASSERT_EQ(r.body, R"({"Error":""})");
  const std::string m = c.send("GET", "/metrics").body;
  auto sumOf = [&](std::string_view phase) {
    const std::string key = "tally_extender_bind_phase_seconds_sum{phase=\"" + std::string(phase) + "\"} ";
    const auto at = m.find(key);
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + key.size()));
  };
  EXPECT_NE(m.find(R"(tally_extender_bind_phase_seconds_count{phase="post"} 1)"), std::string::npos) << m;
  EXPECT_NE(m.find(R"(tally_extender_bind_phase_seconds_count{phase="assume"} 1)"), std::string::npos) << m;
  EXPECT_GE(sumOf("post"), 0.06);
  EXPECT_GT(sumOf("assume"), 0.0);
  EXPECT_LT(sumOf("assume"), 0.06);  // the publication, not the POST
}

// kube-scheduler stops waiting for a bind after its httpTimeout and schedules
// the pod again; a bind still queued by then must not be posted.
TEST(Http, BindQueuedPastTheDeadlineIsAnsweredWithoutPosting) {
  auto writer = loadedWriter(cluster());
  writer->start();
  std::atomic<int> posts{0};
  PodBinder binder(
      *writer,
      [&](const wire::BindingArgs&) {
        ++posts;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return std::string();
      },
      PodBinder::Options{.threads = 1, .queueDeadline = std::chrono::milliseconds(100)});
  std::promise<std::string> first, second;
  binder.bind({.podName = "pending", .podNamespace = "tenant-a", .podUid = "uid-pending", .node = "free"},
              [&](std::string_view outcome, std::string, PodBinder::Times) { first.set_value(std::string(outcome)); });
  binder.bind({.podName = "late", .podNamespace = "tenant-a", .podUid = "uid-late", .node = "free"},
              [&](std::string_view outcome, std::string error, PodBinder::Times times) {
                EXPECT_NE(error.find("pod tenant-a/late"), std::string::npos) << error;
                EXPECT_NE(error.find("100 ms deadline"), std::string::npos) << error;
                EXPECT_EQ(times.postSeconds, 0.0);
                second.set_value(std::string(outcome));
              });
  EXPECT_EQ(first.get_future().get(), "bound");
  EXPECT_EQ(second.get_future().get(), "expired");
  EXPECT_EQ(posts.load(), 1);
  binder.stop();
  writer->stop();
}

// kube-scheduler binds a pod again when it stopped waiting for the first
// bind: a retry to the same node joins the bind in flight (one POST, both
// answered by it); one to another node is refused at once, naming the first.
TEST(Http, ARetriedBindJoinsTheBindInFlightInsteadOfPostingAgain) {
  auto writer = loadedWriter(cluster());
  writer->start();
  std::atomic<int> posts{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  PodBinder binder(
      *writer,
      [&](const wire::BindingArgs&) {
        ++posts;
        released.wait();  // the first POST is slow
        return std::string();
      },
      PodBinder::Options{.threads = 4});
  const wire::BindingArgs args{
      .podName = "pending", .podNamespace = "tenant-a", .podUid = "uid-pending", .node = "free"};
  std::promise<std::string> first, retry, elsewhere;
  binder.bind(args,
              [&](std::string_view outcome, std::string, PodBinder::Times) { first.set_value(std::string(outcome)); });
  for (int i = 0; i < 200 && posts.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(posts.load(), 1);
  binder.bind(args, [&](std::string_view outcome, std::string error, PodBinder::Times) {
    retry.set_value(std::string(outcome) + ":" + error);
  });
  wire::BindingArgs other = args;
  other.node = "small";
  binder.bind(other, [&](std::string_view outcome, std::string error, PodBinder::Times) {
    EXPECT_NE(error.find("is being bound to free by an earlier bind"), std::string::npos) << error;
    elsewhere.set_value(std::string(outcome));
  });
  EXPECT_EQ(elsewhere.get_future().get(), "refused_in_flight");
  auto retried = retry.get_future();
  EXPECT_EQ(retried.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout) << "answered before the POST";
  release.set_value();
  EXPECT_EQ(first.get_future().get(), "bound");
  EXPECT_EQ(retried.get(), "joined:");
  EXPECT_EQ(posts.load(), 1);
  // Done: a later bind of the pod is a bind of its own again.
  std::promise<std::string> again;
  binder.bind(args,
              [&](std::string_view outcome, std::string, PodBinder::Times) { again.set_value(std::string(outcome)); });
  EXPECT_NE(again.get_future().get(), "joined");
  binder.stop();
  writer->stop();
}

TEST(Http, FailedBindForgetsTheAssumption) {
  Harness h;
  h.postError = "pods \"pending\" is forbidden";
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind",
                  R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-pending","Node":"free"})");
  EXPECT_NE(r.body.find("forbidden"), std::string::npos);
  for (int i = 0; i < 100 && h.writer->snapshots().read()->assumedPlacements != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(h.writer->snapshots().read()->assumedPlacements, 0u);
}

// Operators and the bench tell the extender's threads apart by name (top -H,
// perf, /proc/PID/task/*/comm).
TEST(Http, ServingThreadsCarryTheirNames) {
  Harness h;
  const std::multiset<std::string> names = threadNamesOfThisProcess();
  EXPECT_TRUE(names.contains("tally-http-0"));
  EXPECT_TRUE(names.contains("tally-writer"));
  EXPECT_EQ(names.count("tally-bind"), PodBinder::Options{}.threads);  // every thread of the pool, before any bind
}
