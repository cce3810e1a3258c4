#pragma once
// A keep-alive HTTPS client for the bench, as the API server calls a webhook:
// one TLS connection, verified against the CA that signed the serving
// certificate (and its IP address), requests one after the other.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdint>
#include <string>

namespace tally::bench {

class HttpsClient {
 public:
  // Connects and completes the TLS handshake; throws boost::system::system_error.
  HttpsClient(const std::string& ip, std::uint16_t port, const std::string& caPem);
  ~HttpsClient();
  HttpsClient(const HttpsClient&) = delete;
  HttpsClient& operator=(const HttpsClient&) = delete;

  // POSTs `body` (application/json) to `target`; the status, the answer in `response`.
  int post(const std::string& target, const std::string& body, std::string& response);

 private:
  std::string host_;
  boost::asio::io_context ioc_;
  boost::asio::ssl::context tls_;
  boost::beast::ssl_stream<boost::beast::tcp_stream> stream_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace tally::bench
