#pragma once
// A blocking HTTP/1.1 client for tests: one connection, several requests.

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string>

namespace tally::extender::testing {

struct ClientResponse {
  int status = 0;
  std::string body;
  std::string allow;
  bool keepAlive = false;
};

class TestClient {
 public:
  explicit TestClient(std::uint16_t port) : socket_(ioc_) {
    socket_.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  }
  ClientResponse send(const std::string& method, const std::string& target, const std::string& body = "") {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket_, req);
    return read();
  }
  ClientResponse read() {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    http::read(socket_, buffer_, parser);
    auto& res = parser.get();
    return {static_cast<int>(res.result_int()), res.body(), std::string(res[http::field::allow]), res.keep_alive()};
  }
  void writeRaw(const std::string& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }
  // True when the server closed the connection (reads EOF) within the socket's wait.
  bool closedByServer() {
    char c;
    boost::system::error_code ec;
    socket_.read_some(boost::asio::buffer(&c, 1), ec);
    return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace tally::extender::testing
