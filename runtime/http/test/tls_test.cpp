#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/http/testing/client.hpp"
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

// What start() throws for these options; empty when the server started.
std::string startFailure(const ServerOptions& options) {
  Server server(options, Router{});
  try {
    server.start();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return {};
}

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
  const std::string failure = startFailure(o);
  EXPECT_NE(failure.find("tls.crt"), std::string::npos)
      << (failure.empty() ? "started with a broken certificate" : failure);
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

namespace {

struct Recorder {
  std::mutex mu;
  std::map<std::string, int> rejected;
  Observer observer() {
    Observer o;
    o.onRejected = [this](std::string_view kind) {
      std::lock_guard lock(mu);
      ++rejected[std::string(kind)];
    };
    return o;
  }
};

// A TLS server asking for client certificates signed by `ca`: /healthz for
// anyone, POST /private for a verified caller with an allowed name.
struct MutualTlsHarness {
  TempDir dir;
  Recorder rejected;  // before the server: its threads report here until it stops
  std::unique_ptr<Server> server;
  ~MutualTlsHarness() { server->stop(); }

  MutualTlsHarness(const TestCertificate& ca, std::vector<std::string> allowed) {
    const TestCertificate serving = makeSignedCertificate(ca, "webhook.tally.svc", Use::Server);
    replaceFile(dir.path / "tls.crt", serving.certPem);
    replaceFile(dir.path / "tls.key", serving.keyPem);
    replaceFile(dir.path / "ca.crt", ca.certPem);
    ServerOptions o;
    o.tls = TlsFiles{.certFile = (dir.path / "tls.crt").string(),
                     .keyFile = (dir.path / "tls.key").string(),
                     .clients = ClientCertificates{(dir.path / "ca.crt").string(), std::move(allowed)}};
    Router router;
    addOperationRoutes(router, {});
    router.add(
        "POST", "/private", "private",
        [](Request& req, Respond respond) {
          Response r;
          r.body = req.client() ? req.client()->commonName : "no client";
          respond(std::move(r));
        },
        Caller::VerifiedClient);
    server = std::make_unique<Server>(std::move(o), std::move(router), rejected.observer());
    server->start();
  }
  std::uint16_t port() const { return server->port(); }
};

TlsClient::Options presenting(const TestCertificate& cert) { return {0, {}, cert.certPem, cert.keyPem}; }

}  // namespace

TEST(MutualTls, OnlyAVerifiedClientWithAnAllowedNameReachesTheRoute) {
  const TestCertificate ca = makeCa("tally-test-client-ca");
  MutualTlsHarness h(ca, {"kube-apiserver-webhook-client"});

  // No certificate: the handshake completes, the route answers 401 and its handler never runs.
  TlsClient anonymous(h.port());
  auto r = anonymous.send("POST", "/private", "{}");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(r.body.find("client certificate"), std::string::npos) << r.body;
  EXPECT_EQ(anonymous.send("GET", "/healthz").status, 200) << "routes for anyone still answer";

  // The allowed name, as CN or as a DNS subjectAltName.
  TlsClient apiserver(h.port(), presenting(makeSignedCertificate(ca, "kube-apiserver-webhook-client", Use::Client)));
  r = apiserver.send("POST", "/private", "{}");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "kube-apiserver-webhook-client");
  TlsClient bySan(h.port(),
                  presenting(makeSignedCertificate(ca, "other-cn", Use::Client, {"kube-apiserver-webhook-client"})));
  EXPECT_EQ(bySan.send("POST", "/private", "{}").status, 200);

  // The same CA, another name: 403 naming the caller.
  TlsClient tenant(h.port(), presenting(makeSignedCertificate(ca, "tenant-a", Use::Client)));
  r = tenant.send("POST", "/private", "{}");
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("CN=tenant-a"), std::string::npos) << r.body;

  std::lock_guard lock(h.rejected.mu);
  EXPECT_EQ(h.rejected.rejected["unauthenticated"], 1);
  EXPECT_EQ(h.rejected.rejected["forbidden"], 1);
}

TEST(MutualTls, CertificatesTheCaDidNotSignForClientsAreRefusedInTheHandshake) {
  const TestCertificate ca = makeCa("tally-test-client-ca");
  MutualTlsHarness h(ca, {});
  // Any name the CA signed is allowed here.
  TlsClient ok(h.port(), presenting(makeSignedCertificate(ca, "anyone", Use::Client)));
  EXPECT_EQ(ok.send("POST", "/private", "{}").status, 200);

  const TestCertificate otherCa = makeCa("someone-elses-ca");
  EXPECT_THROW(
      {
        TlsClient forged(h.port(), presenting(makeSignedCertificate(otherCa, "anyone", Use::Client)));
        forged.send("POST", "/private", "{}");
      },
      boost::system::system_error);
  // Signed by the CA but for serving, not for clients.
  EXPECT_THROW(
      {
        TlsClient wrongUse(h.port(), presenting(makeSignedCertificate(ca, "anyone", Use::Server)));
        wrongUse.send("POST", "/private", "{}");
      },
      boost::system::system_error);
  // Self-signed.
  EXPECT_THROW(
      {
        TlsClient selfSigned(h.port(), presenting(makeCertificate("anyone", 7)));
        selfSigned.send("POST", "/private", "{}");
      },
      boost::system::system_error);
}

TEST(MutualTls, ARouteForVerifiedClientsOnAServerWithoutAClientCaDoesNotStart) {
  TempDir dir;
  const TestCertificate serving = makeCertificate("webhook.tally.svc", 3);
  replaceFile(dir.path / "tls.crt", serving.certPem);
  replaceFile(dir.path / "tls.key", serving.keyPem);
  Router router;
  router.add(
      "POST", "/private", "private", [](Request&, Respond respond) { respond({}); }, Caller::VerifiedClient);
  ServerOptions o;
  o.tls = TlsFiles{.certFile = (dir.path / "tls.crt").string(), .keyFile = (dir.path / "tls.key").string()};
  Server withoutCa(o, router);
  EXPECT_THROW(withoutCa.start(), std::runtime_error);
  Server plain(ServerOptions{}, router);
  EXPECT_THROW(plain.start(), std::runtime_error);
}

TEST(MutualTls, AClientCaFileThatCannotBeLoadedFailsTheStartNamingIt) {
  TempDir dir;
  const TestCertificate serving = makeCertificate("webhook.tally.svc", 4);
  replaceFile(dir.path / "tls.crt", serving.certPem);
  replaceFile(dir.path / "tls.key", serving.keyPem);
  replaceFile(dir.path / "ca.crt", "not a certificate\n");
  ServerOptions o;
  o.tls = TlsFiles{.certFile = (dir.path / "tls.crt").string(),
                   .keyFile = (dir.path / "tls.key").string(),
                   .clients = ClientCertificates{(dir.path / "ca.crt").string(), {}}};
  const std::string failure = startFailure(o);
  EXPECT_NE(failure.find("ca.crt"), std::string::npos)
      << (failure.empty() ? "started with an unreadable client CA" : failure);
}

// TLS 1.2 clients offering only ciphers without forward secrecy or without
// AEAD are refused; a modern one gets an ECDHE AEAD suite.
TEST(HttpsServer, WeakTls12CiphersAreRefused) {
  TlsHarness h(makeCertificate("webhook.tally.svc", 11));
  for (const char* weak : {"AES128-SHA", "AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384",
                           "DES-CBC3-SHA", "RC4-SHA:NULL-SHA"}) {
    EXPECT_THROW(TlsClient(h.port(), TlsClient::Options{TLS1_2_VERSION, weak, {}, {}}), boost::system::system_error)
        << weak;
  }
  TlsClient modern(h.port(), TlsClient::Options{TLS1_2_VERSION, {}, {}, {}});
  EXPECT_NE(modern.cipher().find("ECDHE-ECDSA"), std::string::npos) << modern.cipher();
  EXPECT_NE(modern.cipher().find("GCM"), std::string::npos) << modern.cipher();
  EXPECT_EQ(modern.send("GET", "/healthz").status, 200);
}

// A body that follows its header in later TLS records (Go's client writes a
// request's header and body separately) is read whole, on a kept-alive
// connection again and again.
TEST(HttpsServer, BodyInLaterRecordsIsReadWholeOnAKeptAliveConnection) {
  TlsHarness h(makeCertificate("webhook.tally.svc", 12));
  TlsClient c(h.port());
  for (int i = 0; i < 5; ++i) {
    const std::string body(20000 + i, static_cast<char>('a' + i));
    c.writeRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.writeRaw(body.substr(0, 100));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.writeRaw(body.substr(100));
    auto r = c.read();
    ASSERT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.body, body) << i;
  }
}
