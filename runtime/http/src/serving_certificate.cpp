#include "serving_certificate.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdexcept>

#include "tally/common/log.hpp"

namespace tally::runtime::http::detail {

namespace ssl = boost::asio::ssl;

namespace {

constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string lastOpenSslError() {
  char text[256] = {};
  ERR_error_string_n(ERR_get_error(), text, sizeof text);
  ERR_clear_error();
  return text[0] ? text : "unknown error";
}

struct Loaded {
  std::shared_ptr<ssl::context> context;
  std::string error;
};

Loaded load(const TlsFiles& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  SSL_CTX* native = context->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // TLS 1.2: ECDHE key exchange with AEAD ciphers only (TLS 1.3's suites all are).
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) return {nullptr, "OpenSSL refused the TLS 1.2 cipher list"};
  boost::system::error_code ec;
  context->use_certificate_chain_file(files.certFile, ec);
  if (ec) return {nullptr, "cannot load TLS certificate " + files.certFile + ": " + ec.message()};
  context->use_private_key_file(files.keyFile, ssl::context::pem, ec);
  if (ec) return {nullptr, "cannot load TLS key " + files.keyFile + ": " + ec.message()};
  if (SSL_CTX_check_private_key(native) != 1) {
    return {nullptr, "TLS key " + files.keyFile + " does not match the certificate " + files.certFile};
  }
  if (files.clients) {
    const std::string& ca = files.clients->caFile;
    if (SSL_CTX_load_verify_locations(native, ca.c_str(), nullptr) != 1) {
      return {nullptr, "cannot load the client CA file " + ca + ": " + lastOpenSslError()};
    }
    // The CA names go in the handshake's CertificateRequest: clients (Go's
    // among them) pick the certificate those CAs signed.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca.c_str());
    if (!names) return {nullptr, "the client CA file " + ca + " holds no certificate"};
    SSL_CTX_set_client_CA_list(native, names);
    // A client may present no certificate (routes that ask for none still
    // answer, the rest 401); one it presents must verify, for client use.
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
    SSL_CTX_set_purpose(native, X509_PURPOSE_SSL_CLIENT);
    SSL_CTX_set_verify_depth(native, 4);
    static const unsigned char kSessionContext[] = "tally-mtls";
    SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  }
  return {std::move(context), {}};
}

// "subject ..., serial ..." of the context's certificate, for the log.
std::string describe(ssl::context& context) {
  X509* cert = SSL_CTX_get0_certificate(context.native_handle());
  if (!cert) return "no certificate";
  std::string out = "subject ";
  char* subject = X509_NAME_oneline(X509_get_subject_name(cert), nullptr, 0);
  out += subject ? subject : "?";
  OPENSSL_free(subject);
  BIGNUM* serial = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  char* hex = serial ? BN_bn2hex(serial) : nullptr;
  out += ", serial 0x";
  out += hex ? hex : "?";
  OPENSSL_free(hex);
  BN_free(serial);
  return out;
}

}  // namespace

ServingCertificate::ServingCertificate(TlsFiles files) : files_(std::move(files)) {
  if (files_.certFile.empty() || files_.keyFile.empty()) {
    throw std::runtime_error("TLS needs both a certificate file and a key file");
  }
  certStamp_ = stampOf(files_.certFile);
  keyStamp_ = stampOf(files_.keyFile);
  caStamp_ = caStamp();
  Loaded loaded = load(files_);
  if (!loaded.context) throw std::runtime_error(loaded.error);
  current_ = std::move(loaded.context);
  lastCheck_ = std::chrono::steady_clock::now();
}

ServingCertificate::Stamp ServingCertificate::stampOf(const std::string& path) {
  struct stat st {};
  // stat follows symlinks: a Secret volume swaps its ..data link, and the
  // files behind it are new inodes.
  if (::stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

ServingCertificate::Stamp ServingCertificate::caStamp() const {
  return files_.clients ? stampOf(files_.clients->caFile) : Stamp{};
}

std::shared_ptr<ssl::context> ServingCertificate::forNewConnection() {
  const auto now = std::chrono::steady_clock::now();
  if (now - lastCheck_ < files_.reloadCheckInterval) return current_;
  lastCheck_ = now;
  Stamp cert = stampOf(files_.certFile), key = stampOf(files_.keyFile), ca = caStamp();
  if (cert == certStamp_ && key == keyStamp_ && ca == caStamp_) return current_;
  // Remembered whether or not the files load: a broken pair is reported once
  // and tried again when either file changes again.
  certStamp_ = cert;
  keyStamp_ = key;
  caStamp_ = ca;
  Loaded loaded = load(files_);
  if (!loaded.context) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    logWarning("TLS serving certificate files changed but cannot be loaded; new connections keep the current one",
               {{"cert", files_.certFile}, {"current", describe(*current_)}, {"error", loaded.error}});
    return current_;
  }
  current_ = std::move(loaded.context);
  reloads_.fetch_add(1, std::memory_order_relaxed);
  logInfo("TLS serving certificate reloaded", {{"cert", files_.certFile}, {"current", describe(*current_)}});
  return current_;
}

}  // namespace tally::runtime::http::detail
