#pragma once
// A TLS server for the tests whose certificate and key are files in a
// temporary directory, looked at on every accept.

#include <filesystem>
#include <memory>

#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/http/testing/certificate.hpp"

namespace tally::runtime::http::testing {

// On a loopback ephemeral port; POST /echo answers with the body it got.
struct TlsHarness {
  TempDir dir;
  std::filesystem::path cert = dir.path / "tls.crt", key = dir.path / "tls.key";
  std::unique_ptr<Server> server;

  explicit TlsHarness(const TestCertificate& first, ServerOptions options = {}) {
    replaceFile(cert, first.certPem);
    replaceFile(key, first.keyPem);
    options.tls = TlsFiles{.certFile = cert.string(), .keyFile = key.string(), .reloadCheckInterval = {}};
    Router router;
    addOperationRoutes(router, {});
    router.add("POST", "/echo", "echo", [](Request& req, Respond respond) {
      Response r;
      r.body = std::move(req.body());
      respond(std::move(r));
    });
    server = std::make_unique<Server>(std::move(options), std::move(router));
    server->start();
  }
  void install(const TestCertificate& next) {
    replaceFile(cert, next.certPem);
    replaceFile(key, next.keyPem);
  }
  std::uint16_t port() const { return server->port(); }
};

}  // namespace tally::runtime::http::testing
