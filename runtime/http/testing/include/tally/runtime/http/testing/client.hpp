#pragma once
// Blocking HTTP/1.1 clients for the server's tests: one connection, several
// requests; plain TCP or TLS (Boost.Asio over OpenSSL, no verification: the
// tests look at the certificate themselves).

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tally::runtime::http::testing {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::string allow;
  std::string contentType;
  std::string server;
  bool keepAlive = false;
};

template <class Stream>
class BasicClient {
 public:
  ClientResponse send(const std::string& method, const std::string& target, const std::string& body = "",
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    namespace bhttp = boost::beast::http;
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.set(bhttp::field::content_type, "application/json");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream(), req);
    return read();
  }
  ClientResponse read() {
    namespace bhttp = boost::beast::http;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    bhttp::read(stream(), buffer_, parser);
    auto& res = parser.get();
    return {static_cast<int>(res.result_int()),     res.body(),
            std::string(res[bhttp::field::allow]),  std::string(res[bhttp::field::content_type]),
            std::string(res[bhttp::field::server]), res.keep_alive()};
  }
  void writeRaw(const std::string& bytes) { boost::asio::write(stream(), boost::asio::buffer(bytes)); }
  // True when the server closed the connection (reads EOF) within the socket's wait.
  bool closedByServer() {
    char c;
    boost::system::error_code ec;
    stream().read_some(boost::asio::buffer(&c, 1), ec);
    return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset ||
           ec == boost::asio::ssl::error::stream_truncated;
  }

 protected:
  virtual ~BasicClient() = default;
  virtual Stream& stream() = 0;
  boost::asio::io_context ioc_;
  boost::beast::flat_buffer buffer_;
};

class TestClient : public BasicClient<boost::asio::ip::tcp::socket> {
 public:
  explicit TestClient(std::uint16_t port) : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }

 private:
  boost::asio::ip::tcp::socket& stream() override { return socket_; }
  boost::asio::ip::tcp::socket socket_;
};

class TlsClient : public BasicClient<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> {
 public:
  // Throws boost::system::system_error when the connection or handshake fails.
  struct Options {
    int maxVersion = 0;      // e.g. TLS1_2_VERSION; 0: the newest
    std::string cipherList;  // TLS 1.2 ciphers offered; empty: OpenSSL's default
    std::string certPem;     // a client certificate to present, with its key
    std::string keyPem;
  };
  explicit TlsClient(std::uint16_t port, int maxVersion = 0) : TlsClient(port, Options{maxVersion, {}, {}, {}}) {}
  TlsClient(std::uint16_t port, const Options& o) : context_(makeContext(o)), stream_(ioc_, context_) {
    if (o.maxVersion != 0) SSL_set_max_proto_version(stream_.native_handle(), o.maxVersion);
    stream_.next_layer().connect({boost::asio::ip::make_address("127.0.0.1"), port});
    stream_.handshake(boost::asio::ssl::stream_base::client);
  }
  // The serial number and common name of the certificate the server presented.
  long peerSerial() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    long serial = cert ? ASN1_INTEGER_get(X509_get0_serialNumber(cert)) : -1;
    X509_free(cert);
    return serial;
  }
  std::string peerCommonName() {
    X509* cert = SSL_get1_peer_certificate(stream_.native_handle());
    char name[256] = {};
    if (cert) X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof name);
    X509_free(cert);
    return name;
  }
  int protocolVersion() { return SSL_version(stream_.native_handle()); }
  std::string cipher() { return SSL_get_cipher_name(stream_.native_handle()); }

 private:
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket>& stream() override { return stream_; }
  static boost::asio::ssl::context makeContext(const Options& o) {
    boost::asio::ssl::context c(boost::asio::ssl::context::tls_client);
    c.set_verify_mode(boost::asio::ssl::verify_none);
    if (!o.cipherList.empty()) SSL_CTX_set_cipher_list(c.native_handle(), o.cipherList.c_str());
    if (!o.certPem.empty()) {
      c.use_certificate_chain(boost::asio::buffer(o.certPem));
      c.use_private_key(boost::asio::buffer(o.keyPem), boost::asio::ssl::context::pem);
    }
    return c;
  }
  boost::asio::ssl::context context_;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
};

}  // namespace tally::runtime::http::testing
