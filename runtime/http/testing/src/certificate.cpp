#include "tally/runtime/http/testing/certificate.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace tally::runtime::http::testing {

namespace {

std::string drain(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

TestCertificate toPem(X509* cert, EVP_PKEY* key) {
  TestCertificate out;
  std::unique_ptr<BIO, decltype(&BIO_free)> certBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(certBio.get(), cert);
  out.certPem = drain(certBio.get());
  std::unique_ptr<BIO, decltype(&BIO_free)> keyBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PrivateKey(keyBio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  out.keyPem = drain(keyBio.get());
  return out;
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) throw std::runtime_error("OpenSSL could not make extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

Cert parseCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
}

Key parseKey(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return Key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
}

std::atomic<long> nextSerial{5000};

// A fresh key and an unsigned certificate for `commonName`, valid for a day.
std::pair<Key, Cert> draft(const std::string& commonName) {
  Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
  Cert cert(X509_new(), X509_free);
  if (!key || !cert) throw std::runtime_error("OpenSSL could not make a test key");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), nextSerial.fetch_add(1));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(commonName.c_str()), -1, -1, 0);
  return {std::move(key), std::move(cert)};
}

}  // namespace

TestCertificate makeCa(const std::string& commonName) {
  auto [key, cert] = draft(commonName);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) throw std::runtime_error("OpenSSL could not sign");
  return toPem(cert.get(), key.get());
}

TestCertificate makeSignedCertificate(const TestCertificate& ca, const std::string& commonName, Use use,
                                      const std::vector<std::string>& dnsNames) {
  Cert issuer = parseCert(ca.certPem);
  Key issuerKey = parseKey(ca.keyPem);
  if (!issuer || !issuerKey) throw std::runtime_error("the test CA does not parse");
  auto [key, cert] = draft(commonName);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer.get()));
  addExtension(cert.get(), issuer.get(), NID_basic_constraints, "CA:FALSE");
  addExtension(cert.get(), issuer.get(), NID_key_usage, "critical,digitalSignature");
  addExtension(cert.get(), issuer.get(), NID_ext_key_usage, use == Use::Client ? "clientAuth" : "serverAuth");
  if (!dnsNames.empty()) {
    std::string san;
    for (const auto& name : dnsNames) san += (san.empty() ? "DNS:" : ",DNS:") + name;
    addExtension(cert.get(), issuer.get(), NID_subject_alt_name, san);
  }
  if (X509_sign(cert.get(), issuerKey.get(), EVP_sha256()) == 0) throw std::runtime_error("OpenSSL could not sign");
  return toPem(cert.get(), key.get());
}

TestCertificate makeCertificate(const std::string& commonName, long serial) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"),
                                                          EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  if (!key || !cert) throw std::runtime_error("OpenSSL could not make a test key");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(commonName.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) throw std::runtime_error("OpenSSL could not sign");

  TestCertificate out;
  std::unique_ptr<BIO, decltype(&BIO_free)> certBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(certBio.get(), cert.get());
  out.certPem = drain(certBio.get());
  std::unique_ptr<BIO, decltype(&BIO_free)> keyBio(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_PrivateKey(keyBio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.keyPem = drain(keyBio.get());
  return out;
}

void replaceFile(const std::filesystem::path& path, const std::string& content) {
  auto next = path;
  next += ".next";
  {
    std::ofstream out(next, std::ios::binary | std::ios::trunc);
    out << content;
  }
  std::filesystem::rename(next, path);
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path = std::filesystem::temp_directory_path() /
         ("tally-http-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace tally::runtime::http::testing
