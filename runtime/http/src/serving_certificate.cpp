#include "serving_certificate.hpp"

#include <openssl/bn.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <stdexcept>

#include "tally/common/log.hpp"

namespace tally::runtime::http::detail {

namespace ssl = boost::asio::ssl;

namespace {

struct Loaded {
  std::shared_ptr<ssl::context> context;
  std::string error;
};

Loaded load(const TlsFiles& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  context->use_certificate_chain_file(files.certFile, ec);
  if (ec) return {nullptr, "cannot load TLS certificate " + files.certFile + ": " + ec.message()};
  context->use_private_key_file(files.keyFile, ssl::context::pem, ec);
  if (ec) return {nullptr, "cannot load TLS key " + files.keyFile + ": " + ec.message()};
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return {nullptr, "TLS key " + files.keyFile + " does not match the certificate " + files.certFile};
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

std::shared_ptr<ssl::context> ServingCertificate::forNewConnection() {
  const auto now = std::chrono::steady_clock::now();
  if (now - lastCheck_ < files_.reloadCheckInterval) return current_;
  lastCheck_ = now;
  Stamp cert = stampOf(files_.certFile), key = stampOf(files_.keyFile);
  if (cert == certStamp_ && key == keyStamp_) return current_;
  // Remembered whether or not the files load: a broken pair is reported once
  // and tried again when either file changes again.
  certStamp_ = cert;
  keyStamp_ = key;
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
