#include "https_client.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

namespace tally::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

HttpsClient::HttpsClient(const std::string& ip, std::uint16_t port, const std::string& caPem)
    : host_(ip), tls_(asio::ssl::context::tls_client), stream_(ioc_, tls_) {
  tls_.add_certificate_authority(asio::buffer(caPem));
  stream_.set_verify_mode(asio::ssl::verify_peer);
  stream_.set_verify_callback(asio::ssl::host_name_verification(ip));
  beast::get_lowest_layer(stream_).connect(asio::ip::tcp::endpoint(asio::ip::make_address(ip), port));
  beast::get_lowest_layer(stream_).socket().set_option(asio::ip::tcp::no_delay(true));
  stream_.handshake(asio::ssl::stream_base::client);
}

HttpsClient::~HttpsClient() {
  // No TLS close_notify exchange: the bench is done with the connection.
  beast::error_code ignored;
  beast::get_lowest_layer(stream_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
}

int HttpsClient::post(const std::string& target, const std::string& body, std::string& response) {
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, host_);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "application/json, */*");
  req.body() = body;
  req.prepare_payload();
  http::write(stream_, req);
  http::response_parser<http::string_body> parser;
  parser.body_limit(16 << 20);
  http::read(stream_, buffer_, parser);
  response = std::move(parser.get().body());
  return static_cast<int>(parser.get().result_int());
}

}  // namespace tally::bench
