#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "fixtures.hpp"
#include "http_client.hpp"
#include "tally/extender/service.hpp"

using namespace tally;
using namespace tally::extender;
using namespace tally::extender::testing;

namespace {

std::vector<WatchedObject> cluster() {
  return {passthroughClass(), tenantNamespace("tenant-a"), gpuNode("free", 8), gpuNode("small", 1),
          gpuPod("tenant-a", "pending", "uid-p", 4)};
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

  explicit Harness(http::ServerOptions options = serverOptions(), std::unique_ptr<CacheWriter> w = nullptr) {
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
    service = std::make_unique<ExtenderService>(writer->snapshots(), metrics, ServiceOptions{}, binder.get());
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

TEST(Http, FilterWithFullNodeListAnswersWithNodeObjects) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", extenderArgsWithNodeList(podJson("tenant-a", "new", "uid-new", 2), {"free"}));
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

TEST(Http, UnknownPathIs404WrongMethodIs405) {
  Harness h;
  TestClient c(h.port());
  EXPECT_EQ(c.send("POST", "/tally/unknown", "{}").status, 404);
  auto r = c.send("GET", "/tally/filter");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "POST");
  EXPECT_EQ(c.send("POST", "/healthz").status, 405);
}

TEST(Http, MalformedJsonIs400WithAnErrorAndIsCounted) {
  Harness h;
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", R"({"Pod": {"metadata": )");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.rfind(R"({"Error":"ExtenderArgs)", 0), 0u) << r.body;
  auto m = c.send("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(tally_extender_bad_requests_total{kind="json"} 1)"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find(R"(tally_extender_requests_total{route="filter",code="400"} 1)"), std::string::npos);
}

TEST(Http, BodyOverTheLimitIs413) {
  http::ServerOptions o = serverOptions();
  o.maxBodyBytes = 1024;
  Harness h(o);
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/filter", std::string(4096, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_FALSE(r.keepAlive);
}

TEST(Http, KeepAliveServesSeveralRequestsOnOneConnection) {
  Harness h;
  TestClient c(h.port());
  for (int i = 0; i < 5; ++i) {
    auto r = c.send("POST", "/tally/filter", filterBody({"free"}));
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keepAlive);
  }
}

// kube-scheduler's Go client writes a request's first 4 KB and the rest in a
// second write. The server waits for a body that has not fully arrived with
// the socket's low-water mark at the bytes missing: one read for the whole
// rest however many pieces it comes in, then the mark is back at 1 so the
// next request on the connection is read as soon as it arrives.
TEST(Http, BodyArrivingInPiecesIsReadOnceItIsAllThere) {
  http::ServerOptions o = serverOptions();
  o.threads = 1;
  o.idleTimeout = std::chrono::milliseconds(3000);
  Harness h(o);
  const std::string body = filterBody({"free", "small"});
  const std::string expected = TestClient(h.port()).send("POST", "/tally/filter", body).body;
  ASSERT_EQ(h.server->bodyCompletionReads(), 0u);  // that body came with its header

  TestClient c(h.port());
  const std::string head = "POST /tally/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  const std::size_t third = body.size() / 3;
  c.writeRaw(head + body.substr(0, third));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.writeRaw(body.substr(third, third));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.writeRaw(body.substr(2 * third));
  auto r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, expected);
  EXPECT_EQ(h.server->bodyCompletionReads(), 1u) << "the server woke for a piece of the body";

  auto started = std::chrono::steady_clock::now();
  auto next = c.send("GET", "/healthz");
  EXPECT_EQ(next.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1500))
      << "the low-water mark was left above a short request";
  // And a body in pieces again on the same connection.
  c.writeRaw(head + body.substr(0, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.writeRaw(body.substr(10));
  EXPECT_EQ(c.read().body, expected);
  EXPECT_EQ(h.server->bodyCompletionReads(), 2u);

  // The request duration counts the wait for the body; the handling time not.
  const std::string m = TestClient(h.port()).send("GET", "/metrics").body;
  auto value = [&](const std::string& series) {
    auto at = m.find(series + " ");
    EXPECT_NE(at, std::string::npos) << series << " missing";
    return at == std::string::npos ? 0.0 : std::stod(m.substr(at + series.size() + 1));
  };
  const double duration = value(R"(tally_extender_request_duration_seconds_sum{route="filter"})");
  const double handling = value(R"(tally_extender_request_handling_seconds_sum{route="filter"})");
  EXPECT_GE(duration, 0.1);  // two 50 ms pauses within the first body in pieces
  EXPECT_LT(handling, duration - 0.09);
  EXPECT_GT(handling, 0.0);
}

// A client with Nagle's algorithm on (TestClient leaves it on) holds the
// second part of a body until the first is acknowledged; the server, waiting
// for the whole body without reading, must acknowledge at once instead of
// after the kernel's delayed-ACK timer (40 ms a request: 800 ms for these 20).
TEST(Http, BodyInPiecesFromANagleClientIsNotHeldByDelayedAcks) {
  Harness h;
  TestClient c(h.port());
  const std::string body = filterBody({"free", "small"});
  const std::string head = "POST /tally/filter HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    c.writeRaw(head + body.substr(0, body.size() / 2));
    c.writeRaw(body.substr(body.size() / 2));
    ASSERT_EQ(c.read().status, 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(400));
  EXPECT_GE(h.server->bodyCompletionReads(), 1u);
}

TEST(Http, PipelinedRequestsAreAnsweredInOrder) {
  Harness h;
  TestClient c(h.port());
  const std::string body = filterBody({"free"});
  const std::string one = "POST /tally/filter HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  c.writeRaw(one + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + one);
  auto a = c.read();
  auto b = c.read();
  auto d = c.read();
  EXPECT_EQ(a.status, 200);
  EXPECT_NE(a.body.find(R"("NodeNames":["free"])"), std::string::npos) << a.body;
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(d.body, a.body);
}

TEST(Http, IdleConnectionIsClosedAfterTheIdleTimeout) {
  http::ServerOptions o = serverOptions();
  o.idleTimeout = std::chrono::milliseconds(200);
  Harness h(o);
  TestClient c(h.port());
  EXPECT_EQ(c.send("GET", "/healthz").status, 200);
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(Http, StalledRequestIsCutOffAtTheReadTimeout) {
  http::ServerOptions o = serverOptions();
  o.readTimeout = std::chrono::milliseconds(200);
  Harness h(o);
  TestClient c(h.port());
  c.writeRaw("POST /tally/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"Pod\":");
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  // Beast's timer closes the socket first and the read's completion handler,
  // which counts the timeout, runs after it: under load the client can see the
  // close before the count lands. Poll briefly.
  std::string body;
  for (int i = 0; i < 50; ++i) {
    body = TestClient(h.port()).send("GET", "/metrics").body;
    if (body.find(R"(tally_extender_bad_requests_total{kind="timeout"} 1)") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(body.find(R"(tally_extender_bad_requests_total{kind="timeout"} 1)"), std::string::npos) << body;
}

TEST(Http, NotSyncedFilterIsAnErrorAndReadyzFails) {
  CacheWriter::Options o;
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
  auto r = c.send("POST", "/tally/bind", R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-p","Node":"free"})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"Error":""})");
  EXPECT_EQ(h.posts.load(), 1);
  auto f = c.send("POST", "/tally/filter", filterBody({"free"}, 5));
  EXPECT_NE(f.body.find(R"("NodeNames":[])"), std::string::npos) << f.body;
  EXPECT_NE(f.body.find("with 4 of 8"), std::string::npos) << f.body;
}

// Operators tell a slow API server from a slow cache by the phase a bind spends
// its time in.
TEST(Http, BindReportsTheTimeOfEachPhase) {
  Harness h;
  h.postDelay = std::chrono::milliseconds(60);
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind", R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-p","Node":"free"})");
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

TEST(Http, FailedBindForgetsTheAssumption) {
  Harness h;
  h.postError = "pods \"pending\" is forbidden";
  TestClient c(h.port());
  auto r = c.send("POST", "/tally/bind", R"({"PodName":"pending","PodNamespace":"tenant-a","PodUID":"uid-p","Node":"free"})");
  EXPECT_NE(r.body.find("forbidden"), std::string::npos);
  for (int i = 0; i < 100 && h.writer->snapshots().read()->assumedPlacements != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(h.writer->snapshots().read()->assumedPlacements, 0u);
}

TEST(Http, TlsListenerServesVerbs) {
  auto dir = std::filesystem::temp_directory_path() / ("tally-tls-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -keyout " +
                    (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl CLI not available";
  http::ServerOptions o = serverOptions();
  o.tls = http::TlsFiles{.certFile = (dir / "cert.pem").string(), .keyFile = (dir / "key.pem").string()};
  Harness h(o);
  EXPECT_TRUE(h.server->tls());
  std::string out = (dir / "out.txt").string();
  std::string curl = "curl -sk -o " + out + " -w '%{http_code}' https://127.0.0.1:" + std::to_string(h.port()) +
                     "/healthz > " + (dir / "code.txt").string() + " 2>/dev/null";
  if (std::system(curl.c_str()) != 0) GTEST_SKIP() << "curl not available";
  std::ifstream code(dir / "code.txt");
  std::string status;
  code >> status;
  EXPECT_EQ(status, "200");
  std::filesystem::remove_all(dir);
}

// Operators and the bench tell the extender's threads apart by name (top -H,
// perf, /proc/PID/task/*/comm).
TEST(Http, ServingThreadsCarryTheirNames) {
  Harness h;
  std::multiset<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names.insert(name);
  }
  EXPECT_TRUE(names.contains("tally-http-0"));
  EXPECT_TRUE(names.contains("tally-writer"));
  EXPECT_EQ(names.count("tally-bind"), PodBinder::Options{}.threads);  // every thread of the pool, before any bind
}
