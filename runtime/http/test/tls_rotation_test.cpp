#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "tally/runtime/http/testing/client.hpp"
#include "tls_harness.hpp"

using namespace tally::runtime::http;
using namespace tally::runtime::http::testing;

// Webhook clients (the API server) keep connecting while cert-manager
// rotates the serving certificate; the files are even replaced one at a time,
// so the server meets a certificate without its key on the way. No request
// may fail: handshakes in flight finish with the context they began with, and
// a pair that does not load leaves the current one serving.
TEST(HttpsServer, ClientsSeeNoFailedRequestWhileTheCertificateRotates) {
  std::vector<TestCertificate> certificates;
  for (long serial = 1; serial <= 4; ++serial) {
    certificates.push_back(makeCertificate("webhook-" + std::to_string(serial), serial));
  }
  ServerOptions o;
  o.threads = 3;
  TlsHarness h(certificates[0], o);

  constexpr int kClients = 8, kConnections = 12, kRequestsPerConnection = 3;
  std::atomic<bool> done{false};
  std::atomic<int> rotations{0};
  std::thread rotator([&] {
    for (std::size_t i = 1; !done.load(); ++i) {
      const TestCertificate& next = certificates[i % certificates.size()];
      replaceFile(h.cert, next.certPem);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      replaceFile(h.key, next.keyPem);
      ++rotations;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  std::atomic<int> ok{0}, failed{0};
  std::mutex seenMu;
  std::set<long> seen;
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      for (int n = 0; n < kConnections; ++n) {
        try {
          TlsClient c(h.port());
          {
            std::lock_guard lock(seenMu);
            seen.insert(c.peerSerial());
          }
          for (int i = 0; i < kRequestsPerConnection; ++i) {
            const std::string body = "client " + std::to_string(t) + " request " + std::to_string(i);
            auto r = c.send("POST", "/echo", body);
            (r.status == 200 && r.body == body ? ok : failed)++;
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << "client " << t << ": " << e.what();
          ++failed;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  done = true;
  rotator.join();

  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ok.load(), kClients * kConnections * kRequestsPerConnection);
  EXPECT_GT(rotations.load(), 0);
  EXPECT_GT(h.server->certificateStats().reloads, 0u);
  std::lock_guard lock(seenMu);
  EXPECT_GT(seen.size(), 1u) << "no client saw a rotated certificate";
}
