#pragma once
// Keeps a webhook server's serving certificate without anyone's help, on the
// runtime's Manager:
//
// * The leader (a leader-only controller) makes sure a kubernetes.io/tls
//   Secret holds a CA (ca.crt, ca.key) and a serving certificate it signed for
//   the Service's names (tls.crt, tls.key); creates it when missing and
//   rotates before expiry (after rotateFraction of a lifetime), writing with
//   the Secret's resourceVersion (a 409 re-reads and decides again). It
//   writes ca.crt into the caBundle of every webhook of the named
//   Mutating/ValidatingWebhookConfigurations.
// * A CA rotates in two steps, so no admission fails on the way: the new CA
//   first joins the bundle (ca.crt = new CA + old CA, injected everywhere)
//   while the old serving certificate is still served; only after
//   bundlePropagation does a serving certificate signed by the new CA
//   replace it; the old CA leaves the bundle caOverlap later (replicas that
//   still serve the old certificate verify until then).
// * Every replica (a controller on every replica) watches the Secret and
//   writes tls.crt and tls.key into `directory` (a temporary file, then a
//   rename), where runtime/http's server picks them up.
//
// When certFile and keyFile are given the keeper does nothing: the server
// serves those files.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tally/runtime/admission/certificates.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/manager.hpp"

namespace tally::runtime::admission {

struct CertificateKeeperOptions {
  // Given by flags: served as they are, nothing is generated.
  std::string certFile;
  std::string keyFile;

  std::string secretNamespace;
  std::string secretName;
  // The Service the API server calls: its DNS names go into the certificate.
  std::string serviceName;
  std::string serviceNamespace;
  std::vector<std::string> extraDnsNames;
  std::vector<std::string> ipAddresses;
  std::vector<std::string> mutatingWebhookConfigurations;
  std::vector<std::string> validatingWebhookConfigurations;
  // Where every replica writes tls.crt and tls.key.
  std::string directory;

  KeyAlgorithm key = KeyAlgorithm::kEcdsaP256;
  std::chrono::seconds caValidity{std::chrono::hours(24 * 365 * 5)};
  std::chrono::seconds servingValidity{std::chrono::hours(24 * 365)};
  double rotateFraction = 2.0 / 3.0;
  // A new CA is in the injected bundles this long before a certificate it
  // signed is served (the API server's view of the configurations lags).
  std::chrono::milliseconds bundlePropagation{10'000};
  // The previous CA stays in the bundle this long after the serving
  // certificate it signed was replaced.
  std::chrono::milliseconds caOverlap{std::chrono::hours(1)};
};

struct CertificateKeeperStats {
  std::uint64_t secretsCreated = 0;
  std::uint64_t servingRotations = 0;
  std::uint64_t caRotations = 0;
  std::uint64_t bundleInjections = 0;  // configuration patches
  std::uint64_t conflicts = 0;         // writes refused for a stale resourceVersion or an existing Secret
  std::uint64_t filesWritten = 0;      // certificate/key pairs written into the directory
};

class CertificateKeeper {
 public:
  CertificateKeeper(std::shared_ptr<Client> client, CertificateKeeperOptions options);
  ~CertificateKeeper();
  CertificateKeeper(const CertificateKeeper&) = delete;
  CertificateKeeper& operator=(const CertificateKeeper&) = delete;

  // Whether the keeper has work (no files were given).
  bool managing() const { return options_.certFile.empty(); }
  // Adds the Secret and configuration informers and the two controllers to
  // the manager; nothing when files were given. Call before manager.run().
  void attach(Manager& manager);

  // The files the HTTPS server reads.
  http::TlsFiles tlsFiles() const;
  // Whether those files hold a certificate and its key (for /readyz).
  bool ready() const;

  // Makes the leader replace the serving certificate at its next look (and,
  // with `withCa`, first the CA, in its two steps), fresh or not.
  void forceRotation(bool withCa);

  CertificateKeeperStats stats() const;

  struct State;

 private:
  CertificateKeeperOptions options_;
  std::shared_ptr<State> state_;
};

}  // namespace tally::runtime::admission
