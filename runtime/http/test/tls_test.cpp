#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "test_client.hpp"
#include "tls_harness.hpp"

using namespace tally::runtime;
using namespace tally::runtime::http;
using namespace tally::runtime::http::testing;

namespace {

// Collects what the runtime logs while it lives.
struct CapturedLog {
  std::mutex mu;
  std::vector<std::string> all;
  CapturedLog() {
    tally::setLogSink([this](tally::LogLevel level, std::string_view line) {
      std::lock_guard lock(mu);
      all.push_back((level == tally::LogLevel::kWarning ? "warning: "
                     : level == tally::LogLevel::kInfo  ? "info: "
                                                        : "other: ") +
                    std::string(line));
    });
  }
  ~CapturedLog() { tally::setLogSink(nullptr); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu);
    return all;
  }
};

}  // namespace

TEST(HttpsServer, ServesOverTls12OrNewerWithTheConfiguredCertificate) {
  TlsHarness h(makeCertificate("webhook.tally.svc", 1001));
  EXPECT_TRUE(h.server->tls());
  TlsClient c(h.port());
  EXPECT_EQ(c.peerSerial(), 1001);
  EXPECT_EQ(c.peerCommonName(), "webhook.tally.svc");
  EXPECT_GE(c.protocolVersion(), TLS1_2_VERSION);
  auto r = c.send("GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_TRUE(r.keepAlive);
  EXPECT_EQ(c.send("POST", "/echo", "over tls").body, "over tls");
}

TEST(HttpsServer, RefusesTls11) {
  TlsHarness h(makeCertificate("webhook.tally.svc", 1));
  EXPECT_THROW(TlsClient(h.port(), TLS1_1_VERSION), boost::system::system_error);
  EXPECT_EQ(TlsClient(h.port()).send("GET", "/healthz").status, 200);
}

TEST(HttpsServer, PlainHttpOnTheTlsPortIsRefused) {
  TlsHarness h(makeCertificate("webhook.tally.svc", 1));
  TestClient c(h.port());
  c.writeRaw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  // Whatever the TLS engine answers (an alert, perhaps), the connection ends.
  bool closed = false;
  for (int i = 0; i < 64 && !closed; ++i) closed = c.closedByServer();
  EXPECT_TRUE(closed);
}

TEST(HttpsServer, BodyOverTheLimitIs413OverTls) {
  ServerOptions o;
  o.maxBodyBytes = 1024;
  TlsHarness h(makeCertificate("webhook.tally.svc", 1), o);
  auto r = TlsClient(h.port()).send("POST", "/echo", std::string(2048, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_FALSE(r.keepAlive);
}

TEST(HttpsServer, StartFailsNamingACertificateThatCannotBeLoaded) {
  TempDir dir;
  replaceFile(dir.path / "tls.crt", "not a certificate");
  replaceFile(dir.path / "tls.key", makeCertificate("x", 1).keyPem);
  ServerOptions o;
  o.tls = TlsFiles{.certFile = (dir.path / "tls.crt").string(), .keyFile = (dir.path / "tls.key").string()};
  Server server(o, Router{});
  try {
    server.start();
    FAIL() << "started with a broken certificate";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tls.crt"), std::string::npos) << e.what();
  }
}

// Serving certificates rotate (cert-manager, a Secret volume's update): the
// files are re-read when they change, new connections get the new
// certificate and connections already open keep theirs.
TEST(HttpsServer, NewConnectionsGetTheReplacedCertificateOpenOnesKeepTheirs) {
  CapturedLog log;
  TlsHarness h(makeCertificate("webhook-old", 1));
  TlsClient old(h.port());
  ASSERT_EQ(old.peerSerial(), 1);
  ASSERT_EQ(old.send("GET", "/healthz").status, 200);

  h.install(makeCertificate("webhook-new", 2));
  TlsClient fresh(h.port());
  EXPECT_EQ(fresh.peerSerial(), 2);
  EXPECT_EQ(fresh.peerCommonName(), "webhook-new");
  EXPECT_EQ(fresh.send("GET", "/healthz").status, 200);
  EXPECT_EQ(h.server->certificateStats().reloads, 1u);

  auto again = old.send("POST", "/echo", "still here");
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.body, "still here");
  EXPECT_EQ(old.peerSerial(), 1);
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("info: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(R"("msg":"TLS serving certificate reloaded")"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("CN=webhook-new"), std::string::npos) << lines[0];
}

TEST(HttpsServer, UnreadableReplacementKeepsTheCurrentCertificate) {
  CapturedLog log;
  const TestCertificate first = makeCertificate("webhook-old", 7);
  TlsHarness h(first);
  replaceFile(h.cert, "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n");
  TlsClient c(h.port());
  EXPECT_EQ(c.peerSerial(), 7);
  EXPECT_EQ(c.send("GET", "/healthz").status, 200);
  EXPECT_EQ(h.server->certificateStats().failures, 1u);
  EXPECT_EQ(h.server->certificateStats().reloads, 0u);
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("warning: ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(R"("msg":"TLS serving certificate files changed but cannot be loaded)"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("CN=webhook-old"), std::string::npos) << lines[0];

  // Reported once, not on every accept while the files stay as they are.
  EXPECT_EQ(TlsClient(h.port()).peerSerial(), 7);
  EXPECT_EQ(h.server->certificateStats().failures, 1u);

  // A missing file is no better.
  std::filesystem::remove(h.cert);
  EXPECT_EQ(TlsClient(h.port()).peerSerial(), 7);
  EXPECT_EQ(h.server->certificateStats().failures, 2u);

  // A good pair later is picked up.
  h.install(makeCertificate("webhook-new", 8));
  EXPECT_EQ(TlsClient(h.port()).peerSerial(), 8);
  EXPECT_EQ(h.server->certificateStats().reloads, 1u);
}

TEST(HttpsServer, KeyThatDoesNotMatchTheCertificateKeepsTheCurrentOne) {
  const TestCertificate first = makeCertificate("webhook-old", 3);
  TlsHarness h(first);
  // The certificate is replaced before its key: for a moment the pair does not match.
  replaceFile(h.cert, makeCertificate("webhook-new", 4).certPem);
  EXPECT_EQ(TlsClient(h.port()).peerSerial(), 3);
  EXPECT_EQ(h.server->certificateStats().failures, 1u);
}

TEST(HttpsServer, UnchangedFilesAreNotReloaded) {
  TlsHarness h(makeCertificate("webhook", 5));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(TlsClient(h.port()).peerSerial(), 5);
  EXPECT_EQ(h.server->certificateStats().reloads, 0u);
  EXPECT_EQ(h.server->certificateStats().failures, 0u);
}

TEST(HttpsServer, ChangesAreLookedAtNoMoreOftenThanTheCheckInterval) {
  TempDir dir;
  const TestCertificate first = makeCertificate("webhook-old", 1);
  replaceFile(dir.path / "tls.crt", first.certPem);
  replaceFile(dir.path / "tls.key", first.keyPem);
  ServerOptions o;
  o.tls = TlsFiles{.certFile = (dir.path / "tls.crt").string(),
                   .keyFile = (dir.path / "tls.key").string(),
                   .reloadCheckInterval = std::chrono::milliseconds(300)};
  Server server(o, Router{});
  server.start();
  const TestCertificate next = makeCertificate("webhook-new", 2);
  replaceFile(dir.path / "tls.crt", next.certPem);
  replaceFile(dir.path / "tls.key", next.keyPem);
  EXPECT_EQ(TlsClient(server.port()).peerSerial(), 1);  // checked at start, not yet due
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  EXPECT_EQ(TlsClient(server.port()).peerSerial(), 2);
}
