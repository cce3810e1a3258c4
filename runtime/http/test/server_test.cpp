#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <iostream>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <malloc.h>
#include <sys/resource.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// The sanitizer runtime's count of heap bytes (GCC ships no header declaring it).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

#include "tally/common/thread_name.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/http/testing/client.hpp"

using namespace tally::runtime::http;
using namespace tally::runtime::http::testing;

namespace {

// What the server told its observer, per route and per refusal.
struct Recorder {
  std::mutex mu;
  std::map<std::string, int> rejected;
  std::map<std::string, double> seconds, handling;
  std::map<std::string, int> responses;

  Observer observer() {
    Observer o;
    o.onResponse = [this](std::string_view route, int, double s, double h) {
      std::lock_guard lock(mu);
      seconds[std::string(route)] += s;
      handling[std::string(route)] += h;
      ++responses[std::string(route)];
    };
    o.onRejected = [this](std::string_view kind) {
      std::lock_guard lock(mu);
      ++rejected[std::string(kind)];
    };
    return o;
  }
  int rejections(const std::string& kind) {
    std::lock_guard lock(mu);
    return rejected[kind];
  }
};

// POST /echo answers with the body it got; the operations routes are there.
Router echoRouter() {
  Router router;
  router.add("POST", "/echo", "echo", [](Request& req, Respond respond) {
    Response r;
    r.body = std::move(req.body());
    respond(std::move(r));
  });
  addOperationRoutes(router, {});
  return router;
}

// A running server on a loopback ephemeral port.
struct Harness {
  Recorder recorder;
  std::unique_ptr<Server> server;
  explicit Harness(ServerOptions options = {}, Router router = echoRouter()) {
    server = std::make_unique<Server>(std::move(options), std::move(router), recorder.observer());
    server->start();
  }
  std::uint16_t port() const { return server->port(); }
};

// A body of the size kube-scheduler sends for a few nodes, small enough to
// come in with its header in one read when written at once.
std::string filterSizedBody() {
  std::string body = R"({"NodeNames":[)";
  for (int i = 0; i < 40; ++i) body += (i ? ",\"node-" : "\"node-") + std::to_string(i) + "\"";
  return body + "]}";
}

Response teapotBody(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.contentType = "application/problem+json";
  r.body = R"({"teapot":")" + std::string(message) + R"("})";
  return r;
}

}  // namespace

TEST(HttpServer, UnknownPathIs404WrongMethodIs405) {
  Harness h;
  TestClient c(h.port());
  EXPECT_EQ(c.send("POST", "/unknown", "{}").status, 404);
  auto r = c.send("GET", "/echo");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.allow, "POST");
  EXPECT_EQ(c.send("POST", "/healthz").status, 405);
  EXPECT_EQ(h.recorder.rejections("not_found"), 1);
  EXPECT_EQ(h.recorder.rejections("method_not_allowed"), 2);
}

TEST(HttpServer, RefusalsCarryTheOwnersErrorBody) {
  ServerOptions o;
  o.errorBody = teapotBody;
  Harness h(o);
  TestClient c(h.port());
  auto r = c.send("POST", "/unknown", "{}");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"teapot":"no such path: /unknown"})");
  EXPECT_EQ(r.contentType, "application/problem+json");
  r = c.send("GET", "/echo");
  EXPECT_EQ(r.body, R"({"teapot":"GET is not allowed on /echo"})");
}

TEST(HttpServer, DefaultErrorBodyIsTheMessageAsText) {
  Harness h;
  auto r = TestClient(h.port()).send("POST", "/unknown");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "no such path: /unknown\n");
  EXPECT_EQ(r.contentType, "text/plain; charset=utf-8");
}

TEST(HttpServer, BodyOverTheLimitIs413) {
  ServerOptions o;
  o.maxBodyBytes = 1024;
  Harness h(o);
  TestClient c(h.port());
  auto r = c.send("POST", "/echo", std::string(4096, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_FALSE(r.keepAlive);
  EXPECT_EQ(h.recorder.rejections("body_too_large"), 1);
}

TEST(HttpServer, BodyOverTheLimitIs413WithTheOwnersErrorBody) {
  ServerOptions o;
  o.maxBodyBytes = 1024;
  o.errorBody = teapotBody;
  Harness h(o);
  auto r = TestClient(h.port()).send("POST", "/echo", std::string(1025, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, R"({"teapot":"request body exceeds the limit of 1024 bytes"})");
  EXPECT_EQ(r.contentType, "application/problem+json");
  // At the limit is not over it.
  EXPECT_EQ(TestClient(h.port()).send("POST", "/echo", std::string(1024, 'x')).status, 200);
}

TEST(HttpServer, MalformedRequestIs400AndClosesTheConnection) {
  ServerOptions o;
  o.errorBody = teapotBody;
  Harness h(o);
  TestClient c(h.port());
  c.writeRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n");
  auto r = c.read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.rfind(R"({"teapot":"malformed HTTP request: )", 0), 0u) << r.body;
  EXPECT_FALSE(r.keepAlive);
  EXPECT_EQ(h.recorder.rejections("malformed_http"), 1);
}

TEST(HttpServer, HandlerThatThrowsIs500WithTheErrorBody) {
  Router router;
  router.add("GET", "/boom", "boom", [](Request&, Respond) { throw std::runtime_error("disk on fire"); });
  ServerOptions o;
  o.errorBody = teapotBody;
  Harness h(o, std::move(router));
  auto r = TestClient(h.port()).send("GET", "/boom");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, R"({"teapot":"internal error: disk on fire"})");
}

TEST(HttpServer, HandlerSeesMethodPathQueryAndHeaders) {
  std::mutex mu;
  std::string seen;
  Router router;
  router.add("POST", "/inspect", "inspect", [&](Request& req, Respond respond) {
    std::lock_guard lock(mu);
    seen = std::string(req.method()) + " " + std::string(req.path()) + " ?" + std::string(req.rawQuery()) + " |";
    for (const auto& p : req.queryParams()) seen += " " + p.key + "=" + p.value;
    seen += " | timeout=" + std::string(req.query("timeout").value_or("-"));
    seen += " missing=" + std::string(req.query("missing").value_or("-"));
    seen += " | ct=" + std::string(req.header("content-type").value_or("-"));
    seen += " trace=" + std::string(req.header("X-TRACE-ID").value_or("-"));
    seen += " absent=" + std::string(req.header("X-Absent").value_or("-"));
    seen += " | " + req.body();
    respond(Response{});
  });
  Harness h({}, std::move(router));
  TestClient c(h.port());
  auto r = c.send("POST", "/inspect?timeout=10s&dryRun&name=a%2Fb+c&timeout=20s", "{}", {{"x-Trace-Id", "abc"}});
  EXPECT_EQ(r.status, 200);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen,
            "POST /inspect ?timeout=10s&dryRun&name=a%2Fb+c&timeout=20s | timeout=10s dryRun= name=a/b c timeout=20s"
            " | timeout=10s missing=- | ct=application/json trace=abc absent=- | {}");
}

TEST(HttpServer, RouteMatchingIgnoresTheQuery) {
  Harness h;
  auto r = TestClient(h.port()).send("POST", "/echo?x=1", "hello");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
}

TEST(HttpRequest, QueryDecodingKeepsOrderAndOddPercents) {
  Request req("GET", "/p?a=1&&b=%41%zz&c+d=%2&=v&e");
  ASSERT_EQ(req.queryParams().size(), 5u);
  EXPECT_EQ(req.queryParams()[0].key, "a");
  EXPECT_EQ(req.queryParams()[1].value, "A%zz");
  EXPECT_EQ(req.queryParams()[2].key, "c d");
  EXPECT_EQ(req.queryParams()[2].value, "%2");
  EXPECT_EQ(req.queryParams()[3].key, "");
  EXPECT_EQ(req.query("e").value_or("-"), "");
  EXPECT_EQ(req.path(), "/p");
  EXPECT_FALSE(req.header("Host").has_value());  // built by hand: no headers
  EXPECT_TRUE(Request("GET", "/p").queryParams().empty());
}

TEST(HttpServer, ResponsesNameTheOwnersServer) {
  ServerOptions o;
  o.serverHeader = "tally-controller";
  Harness h(o);
  EXPECT_EQ(TestClient(h.port()).send("GET", "/healthz").server, "tally-controller");
}

TEST(HttpServer, AHandlerMayAnswerLaterFromAnotherThread) {
  std::vector<std::thread> later;
  std::mutex mu;
  Router router;
  router.add("POST", "/later", "later", [&](Request& req, Respond respond) {
    std::lock_guard lock(mu);
    later.emplace_back([body = std::move(req.body()), respond = std::move(respond)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      Response r;
      r.body = body + "!";
      respond(std::move(r));
    });
  });
  {
    Harness h({}, std::move(router));
    TestClient c(h.port());
    EXPECT_EQ(c.send("POST", "/later", "one").body, "one!");
    EXPECT_EQ(c.send("POST", "/later", "two").body, "two!");
    std::lock_guard lock(mu);
    for (auto& t : later) t.join();
  }
}

TEST(HttpServer, OperationRoutesAnswerHealthReadinessAndMetrics) {
  std::atomic<bool> ready{false};
  Router router;
  addOperationRoutes(router, {.readiness =
                                  [&] {
                                    return ready ? Readiness{} : Readiness{false, "the Pod cache is not synced"};
                                  },
                              .metrics = [] { return std::string("up 1\n"); },
                              .metricsContentType = "text/plain; version=0.0.4; charset=utf-8"});
  Harness h({}, std::move(router));
  TestClient c(h.port());
  auto health = c.send("GET", "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  EXPECT_EQ(health.contentType, "text/plain; charset=utf-8");
  auto notReady = c.send("GET", "/readyz");
  EXPECT_EQ(notReady.status, 503);
  EXPECT_EQ(notReady.body, "the Pod cache is not synced\n");
  ready = true;  // the server thread reads it after this request is written
  auto isReady = c.send("GET", "/readyz");
  EXPECT_EQ(isReady.status, 200);
  EXPECT_EQ(isReady.body, "ok\n");
  auto metrics = c.send("GET", "/metrics");
  EXPECT_EQ(metrics.body, "up 1\n");
  EXPECT_EQ(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8");
  std::lock_guard lock(h.recorder.mu);
  EXPECT_EQ(h.recorder.responses["readyz"], 2);
  EXPECT_EQ(h.recorder.responses["healthz"], 1);
}

TEST(HttpServer, WithoutAnExpositionThereIsNoMetricsRoute) {
  Harness h;
  EXPECT_EQ(TestClient(h.port()).send("GET", "/metrics").status, 404);
  EXPECT_EQ(TestClient(h.port()).send("GET", "/readyz").status, 200);
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  Harness h;
  TestClient c(h.port());
  for (int i = 0; i < 5; ++i) {
    auto r = c.send("POST", "/echo", "{}");
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keepAlive);
  }
}

// kube-scheduler's Go client writes a request's first 4 KB and the rest in a
// second write. The server waits for a body that has not fully arrived with
// the socket's low-water mark at the bytes missing: one read for the whole
// rest however many pieces it comes in, then the mark is back at 1 so the
// next request on the connection is read as soon as it arrives.
TEST(HttpServer, BodyArrivingInPiecesIsReadOnceItIsAllThere) {
  ServerOptions o;
  o.threads = 1;
  o.idleTimeout = std::chrono::milliseconds(3000);
  Harness h(o);
  const std::string body = filterSizedBody();
  const std::string expected = TestClient(h.port()).send("POST", "/echo", body).body;
  ASSERT_EQ(expected, body);
  ASSERT_EQ(h.server->bodyCompletionReads(), 0u);  // that body came with its header

  TestClient c(h.port());
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
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
  std::lock_guard lock(h.recorder.mu);
  const double duration = h.recorder.seconds["echo"];
  const double handling = h.recorder.handling["echo"];
  EXPECT_GE(duration, 0.1);  // two 50 ms pauses within the first body in pieces
  EXPECT_LT(handling, duration - 0.09);
  EXPECT_GT(handling, 0.0);
}

// A client with Nagle's algorithm on (TestClient leaves it on) holds the
// second part of a body until the first is acknowledged; the server, waiting
// for the whole body without reading, must acknowledge at once instead of
// after the kernel's delayed-ACK timer (40 ms a request: 800 ms for these 20).
TEST(HttpServer, BodyInPiecesFromANagleClientIsNotHeldByDelayedAcks) {
  Harness h;
  TestClient c(h.port());
  const std::string body = filterSizedBody();
  const std::string head =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    c.writeRaw(head + body.substr(0, body.size() / 2));
    c.writeRaw(body.substr(body.size() / 2));
    ASSERT_EQ(c.read().status, 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(400));
  EXPECT_GE(h.server->bodyCompletionReads(), 1u);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  Harness h;
  TestClient c(h.port());
  const std::string body = R"({"NodeNames":["free"]})";
  const std::string one =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  c.writeRaw(one + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + one);
  auto a = c.read();
  auto b = c.read();
  auto d = c.read();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, body);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "ok\n");
  EXPECT_EQ(d.body, a.body);
}

TEST(HttpServer, IdleConnectionIsClosedAfterTheIdleTimeout) {
  ServerOptions o;
  o.idleTimeout = std::chrono::milliseconds(200);
  Harness h(o);
  TestClient c(h.port());
  EXPECT_EQ(c.send("GET", "/healthz").status, 200);
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(h.recorder.rejections("timeout"), 0);  // an idle kept-alive connection is no refusal
}

// Beast's timer closes the socket first and the read's completion handler,
// which counts the timeout, runs after it: under load the client can see the
// close before the count lands. Poll briefly.
bool countedSoon(Recorder& recorder, const std::string& kind, int count) {
  for (int i = 0; i < 50; ++i) {
    if (recorder.rejections(kind) == count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(HttpServer, StalledRequestIsCutOffAtTheReadTimeout) {
  ServerOptions o;
  o.readTimeout = std::chrono::milliseconds(200);
  Harness h(o);
  TestClient c(h.port());
  c.writeRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"Pod\":");
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(countedSoon(h.recorder, "timeout", 1));
}

TEST(HttpServer, SilentNewConnectionIsCutOffAtTheHeaderTimeout) {
  ServerOptions o;
  o.headerTimeout = std::chrono::milliseconds(200);
  o.readTimeout = std::chrono::milliseconds(20'000);
  Harness h(o);
  TestClient c(h.port());
  auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(c.closedByServer());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(countedSoon(h.recorder, "timeout", 1));
}

// Operators tell the servers' threads apart by name (top -H, perf,
// /proc/PID/task/*/comm).
TEST(HttpServer, ServingThreadsCarryTheirNames) {
  ServerOptions o;
  o.threads = 2;
  Harness plain(o);
  o.threadName = "webhook-https";
  o.threads = 1;
  Harness named(o);
  const std::multiset<std::string> names = tally::threadNamesOfThisProcess();
  EXPECT_TRUE(names.contains("tally-http-0"));
  EXPECT_TRUE(names.contains("tally-http-1"));
  EXPECT_TRUE(names.contains("webhook-https-0"));
}

namespace {

// Heap bytes this process holds now (malloc's arenas and its mmapped blocks;
// under a sanitizer, its allocator's count).
std::size_t allocatedBytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

bool eventually(const std::function<bool()>& done, std::chrono::milliseconds within = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// As many descriptors as the hard limit allows (the flood below needs a few thousand).
std::size_t raiseDescriptorLimit() {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &r);
  ::getrlimit(RLIMIT_NOFILE, &r);
  return static_cast<std::size_t>(r.rlim_cur);
}

}  // namespace

// Connections beyond the cap are closed as they are accepted and counted;
// the ones within it are served, and room frees as they close.
TEST(HttpServer, ConnectionsBeyondTheCapAreClosedAtOnce) {
  ServerOptions o;
  o.maxConnections = 40;
  Harness h(o);
  boost::asio::io_context ioc;
  std::vector<boost::asio::ip::tcp::socket> held;
  for (int i = 0; i < 40; ++i) {
    held.emplace_back(ioc).connect({boost::asio::ip::make_address("127.0.0.1"), h.port()});
  }
  ASSERT_TRUE(eventually([&] { return h.server->openConnections() == 40; })) << h.server->openConnections();
  std::vector<std::unique_ptr<TestClient>> extra;
  for (int i = 0; i < 10; ++i) extra.push_back(std::make_unique<TestClient>(h.port()));
  for (auto& c : extra) EXPECT_TRUE(c->closedByServer());
  EXPECT_TRUE(countedSoon(h.recorder, "connection_limit", 10));
  EXPECT_EQ(h.server->openConnections(), 40u);

  held.clear();
  ASSERT_TRUE(eventually([&] { return h.server->openConnections() == 0; })) << h.server->openConnections();
  EXPECT_EQ(TestClient(h.port()).send("GET", "/healthz").status, 200);
}

// 2,000 connections at once: half declare 16 MiB bodies and send ten bytes,
// half send nothing. The server holds memory for what arrived (not for what
// was declared), and /healthz answers on it and on a second server of the
// process while they wait; closed, they give every connection back.
TEST(HttpServer, TwoThousandStalledConnectionsDeclaringLargeBodiesCostLittleMemory) {
  const std::size_t limit = raiseDescriptorLimit();
  // Each connection costs two descriptors here (client and server end).
  const std::size_t n = std::min<std::size_t>(2000, (limit - 200) / 2);
  ASSERT_GE(n, 500u) << "RLIMIT_NOFILE " << limit << " leaves too few descriptors for the flood";
  ServerOptions o;
  o.maxConnections = 4096;
  o.maxBodyBytes = 16 << 20;
  o.headerTimeout = std::chrono::seconds(60);
  o.readTimeout = std::chrono::seconds(60);
  Harness attacked(o);
  Harness ops;

  const std::size_t before = allocatedBytes();
  boost::asio::io_context ioc;
  std::vector<boost::asio::ip::tcp::socket> flood;
  flood.reserve(n);
  const std::string declared =
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(16 << 20) + "\r\n\r\n{\"Pod\":{}}";
  for (std::size_t i = 0; i < n; ++i) {
    auto& s = flood.emplace_back(ioc);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), attacked.port()});
    if (i % 2 == 0) boost::asio::write(s, boost::asio::buffer(declared));
  }
  ASSERT_TRUE(eventually([&] { return attacked.server->openConnections() == n; }))
      << attacked.server->openConnections() << " of " << n;
  // Every declared header read and its body awaited.
  ASSERT_TRUE(eventually([&] { return attacked.server->bodyCompletionReads() >= n / 2; }))
      << attacked.server->bodyCompletionReads();

  EXPECT_EQ(TestClient(attacked.port()).send("GET", "/healthz").status, 200);
  EXPECT_EQ(TestClient(ops.port()).send("GET", "/healthz").status, 200);
  const std::size_t grown = allocatedBytes() - std::min(before, allocatedBytes());
  // 16 MiB reserved per declared body would be 16 GiB; the connections'
  // buffers and parsers are a few KiB each.
  EXPECT_LT(grown, std::size_t{96} << 20) << grown / 1024 << " KiB for " << n << " connections";
  std::cout << "  " << n << " stalled connections (" << n / 2 << " declaring 16 MiB): " << grown / 1024
            << " KiB allocated\n";

  flood.clear();
  EXPECT_TRUE(eventually([&] { return attacked.server->openConnections() == 0; }))
      << attacked.server->openConnections();
}

// A body that arrives in full after a stall is read whole (the server's
// buffer grows with it), and parsed with simdjson's padding.
TEST(HttpServer, ALargeBodyArrivingLateIsReadWhole) {
  Harness h;
  TestClient c(h.port());
  std::string body(3 << 20, 'x');
  c.writeRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c.writeRaw(body);
  auto r = c.read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), body.size());
}
