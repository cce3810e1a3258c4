#include <algorithm>
#include "tally/runtime/admission/certificates.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <memory>

namespace tally::runtime::admission {

namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Ext = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

// What OpenSSL's error queue says, emptied.
std::string openSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no detail" : out;
}

Error certError(std::string_view what) {
  return Error(ErrorCode::kInternal, std::string(what) + " (OpenSSL: " + openSslErrors() + ")");
}

Key generateKey(KeyAlgorithm algorithm) {
  if (algorithm == KeyAlgorithm::kRsa2048) return Key(EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048}));
  return Key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
}

Bio memoryBio(std::string_view pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

std::string drain(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Cert readCert(std::string_view pem) {
  auto bio = memoryBio(pem);
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key readKey(std::string_view pem) {
  auto bio = memoryBio(pem);
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Ext ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A certificate with a random 127-bit serial, `subject` as CN, and the
// validity window; the issuer and extensions are the caller's.
Cert newCertificate(const std::string& subject, std::chrono::seconds validity, EVP_PKEY* key) {
  Cert cert(X509_new());
  if (!cert) return nullptr;
  Bignum serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1) return nullptr;
  ASN1_INTEGER* asn1Serial = X509_get_serialNumber(cert.get());
  if (!BN_to_ASN1_INTEGER(serial.get(), asn1Serial)) return nullptr;
  if (X509_set_version(cert.get(), 2) != 1) return nullptr;
  // Valid a little before now, for clocks behind ours: 5 minutes, or a tenth
  // of a short lifetime (a backdate longer than the lifetime would put the
  // rotation point, two thirds of notBefore..notAfter, in the past at once).
  const long backdate = std::min<long>(5 * 60, static_cast<long>(validity.count()) / 10);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -backdate);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()));
  if (X509_set_pubkey(cert.get(), key) != 1) return nullptr;
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(subject.c_str()), -1,
                                 -1, 0) != 1) {
    return nullptr;
  }
  return cert;
}

Result<CertificateAndKey> signAndWrite(X509* cert, EVP_PKEY* signer, EVP_PKEY* key, std::string_view what) {
  if (X509_sign(cert, signer, EVP_sha256()) == 0) return certError(std::string(what) + ": signing failed");
  Bio certBio(BIO_new(BIO_s_mem())), keyBio(BIO_new(BIO_s_mem()));
  if (!certBio || !keyBio || PEM_write_bio_X509(certBio.get(), cert) != 1 ||
      PEM_write_bio_PrivateKey(keyBio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return certError(std::string(what) + ": writing PEM failed");
  }
  return CertificateAndKey{drain(certBio.get()), drain(keyBio.get())};
}

std::chrono::system_clock::time_point toTimePoint(const ASN1_TIME* t) {
  std::tm tm{};
  ASN1_TIME_to_tm(t, &tm);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

}  // namespace

std::vector<std::string> serviceDnsNames(std::string_view service, std::string_view ns) {
  const std::string s(service), n(ns);
  return {s, s + "." + n, s + "." + n + ".svc", s + "." + n + ".svc.cluster.local"};
}

Result<CertificateAndKey> makeCa(const CaRequest& request) {
  Key key = generateKey(request.key);
  if (!key) return certError("CA " + request.commonName + ": key generation failed");
  Cert cert = newCertificate(request.commonName, request.validity, key.get());
  if (!cert) return certError("CA " + request.commonName + ": certificate setup failed");
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
      !addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
      !addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash")) {
    return certError("CA " + request.commonName + ": extensions failed");
  }
  return signAndWrite(cert.get(), key.get(), key.get(), "CA " + request.commonName);
}

Result<CertificateAndKey> issueServingCertificate(const CertificateAndKey& ca, const ServingRequest& request) {
  const std::string what = "serving certificate " + request.commonName;
  if (request.dnsNames.empty() && request.ipAddresses.empty()) {
    return Error(ErrorCode::kInternal, what + ": no DNS name and no IP address to serve");
  }
  Cert caCert = readCert(ca.certPem);
  Key caKey = readKey(ca.keyPem);
  if (!caCert || !caKey) return certError(what + ": the CA's certificate or key is not readable PEM");
  Key key = generateKey(request.key);
  if (!key) return certError(what + ": key generation failed");
  Cert cert = newCertificate(request.commonName, request.validity, key.get());
  if (!cert) return certError(what + ": certificate setup failed");
  std::string names;
  for (const auto& dns : request.dnsNames) names += (names.empty() ? "DNS:" : ",DNS:") + dns;
  for (const auto& ip : request.ipAddresses) names += (names.empty() ? "IP:" : ",IP:") + ip;
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(caCert.get())) != 1 ||
      !addExtension(cert.get(), caCert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !addExtension(cert.get(), caCert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
      !addExtension(cert.get(), caCert.get(), NID_ext_key_usage, "serverAuth") ||
      !addExtension(cert.get(), caCert.get(), NID_authority_key_identifier, "keyid:always") ||
      !addExtension(cert.get(), caCert.get(), NID_subject_alt_name, names)) {
    return certError(what + ": extensions failed (names " + names + ")");
  }
  return signAndWrite(cert.get(), caKey.get(), key.get(), what);
}

Result<Validity> readValidity(std::string_view pem) {
  Cert cert = readCert(pem);
  if (!cert) return certError("not a PEM certificate");
  return Validity{toTimePoint(X509_get0_notBefore(cert.get())), toTimePoint(X509_get0_notAfter(cert.get()))};
}

std::chrono::system_clock::time_point rotationDue(const Validity& validity, double fraction) {
  const auto lifetime = validity.notAfter - validity.notBefore;
  return validity.notBefore + std::chrono::duration_cast<std::chrono::system_clock::duration>(lifetime * fraction);
}

std::vector<std::string> splitCertificates(std::string_view pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = pem.find(kBegin, at)) != std::string_view::npos) {
    const std::size_t end = pem.find(kEnd, at);
    if (end == std::string_view::npos) break;
    out.emplace_back(pem.substr(at, end + kEnd.size() - at));
    out.back() += '\n';
    at = end + kEnd.size();
  }
  return out;
}

bool signedBy(std::string_view certPem, std::string_view caPem) {
  Cert cert = readCert(certPem), ca = readCert(caPem);
  if (!cert || !ca) {
    ERR_clear_error();
    return false;
  }
  EVP_PKEY* caKey = X509_get0_pubkey(ca.get());
  const bool ok = caKey && X509_verify(cert.get(), caKey) == 1;
  ERR_clear_error();
  return ok;
}

bool keyMatches(std::string_view certPem, std::string_view keyPem) {
  Cert cert = readCert(certPem);
  Key key = readKey(keyPem);
  const bool ok = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace tally::runtime::admission
