#pragma once
// Serving certificates for a webhook Service, made with OpenSSL 3's EVP API:
// a self-signed CA and a serving certificate it signs for the Service's DNS
// names (and IP addresses for local tests), their validity, and when to
// rotate them.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/result.hpp"

namespace tally::runtime::admission {

enum class KeyAlgorithm { kEcdsaP256, kRsa2048 };

struct CertificateAndKey {
  std::string certPem;
  std::string keyPem;  // PKCS#8 PEM
};

struct CaRequest {
  std::string commonName = "tally-webhook-ca";
  std::chrono::seconds validity{std::chrono::hours(24 * 365 * 5)};
  KeyAlgorithm key = KeyAlgorithm::kEcdsaP256;
};

struct ServingRequest {
  std::string commonName;
  std::vector<std::string> dnsNames;
  std::vector<std::string> ipAddresses;  // "127.0.0.1", "::1"
  std::chrono::seconds validity{std::chrono::hours(24 * 365)};
  KeyAlgorithm key = KeyAlgorithm::kEcdsaP256;
};

// The names a client may use for Service `service` in `ns`: svc, svc.ns,
// svc.ns.svc, svc.ns.svc.cluster.local.
std::vector<std::string> serviceDnsNames(std::string_view service, std::string_view ns);

// A self-signed CA (basicConstraints CA:true, keyCertSign), valid from five
// minutes ago (or a tenth of a short lifetime: clocks differ) for request.validity.
Result<CertificateAndKey> makeCa(const CaRequest& request);
// A serving certificate (serverAuth, the names as subjectAltNames) signed by `ca`.
Result<CertificateAndKey> issueServingCertificate(const CertificateAndKey& ca, const ServingRequest& request);

struct Validity {
  std::chrono::system_clock::time_point notBefore;
  std::chrono::system_clock::time_point notAfter;
};
// Of the first certificate in `pem`.
Result<Validity> readValidity(std::string_view pem);
// When a certificate with this validity should be replaced: after `fraction`
// of its lifetime.
std::chrono::system_clock::time_point rotationDue(const Validity& validity, double fraction = 2.0 / 3.0);

// Every certificate of a PEM bundle, each as its own PEM block, in order.
std::vector<std::string> splitCertificates(std::string_view pem);
// Whether the first certificate of `certPem` carries a signature the first
// certificate of `caPem` made.
bool signedBy(std::string_view certPem, std::string_view caPem);
// Whether `keyPem` is the private key of the first certificate of `certPem`.
bool keyMatches(std::string_view certPem, std::string_view keyPem);

}  // namespace tally::runtime::admission
