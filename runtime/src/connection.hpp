#pragma once
// One TLS connection to the API server. Operations are synchronous for the
// caller but run as Asio async operations on a private io_context so each has
// a deadline; cancel() may be called from another thread.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "tally/runtime/config.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// The client's TLS settings, and the newest session the API server gave a
// ticket for: a new connection offers it and resumes, with no certificate
// exchange, signature or chain verification on either side. The API server
// closes connections idle for 90 s, so a binder's pool is rebuilt after every
// quiet spell; without resumption each rebuilt connection costs both ends a
// full handshake.
struct TlsContext {
  asio::ssl::context ctx{asio::ssl::context::tls_client};

  TlsContext();
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  // Sets the kept session on a connection about to shake hands, if there is one.
  void offer(SSL* ssl);
  // Takes the reference to a copy of a session the server issued.
  void keep(SSL_SESSION* session);

 private:
  std::mutex mu_;
  SSL_SESSION* session_ = nullptr;
};

Result<std::unique_ptr<TlsContext>> makeTlsContext(const ClusterConfig& cfg);

struct ResponseHead {
  int status = 0;
  std::string contentType;
  int retryAfter = 0;
  bool keepAlive = false;
};

class Connection {
 public:
  Connection(TlsContext& tls, const ClusterConfig& cfg);
  ~Connection();

  Status connect();
  Status write(http::request<http::string_body>& req);
  // Reads a whole response (status line, headers, body).
  Result<http::response<http::string_body>> readResponse(std::chrono::milliseconds timeout);
  // Streaming: headers first, then body pieces.
  Result<ResponseHead> readHead(std::chrono::milliseconds timeout);
  // Returns the number of body bytes placed in buf; 0 at the end of the body.
  Result<size_t> readBody(char* buf, size_t size, std::chrono::milliseconds idleTimeout);

  void cancel();  // thread-safe
  // False when the peer closed the idle connection or sent unexpected bytes.
  bool reusable();
  bool reused = false;
  // Whether the TLS handshake resumed an earlier session.
  bool resumedSession() const { return resumed_; }

 private:
  template <class Start>
  beast::error_code run(Start&& start, std::chrono::milliseconds timeout);
  Error netError(const beast::error_code& ec, std::string_view op) const;

  TlsContext& tls_;
  const ClusterConfig& cfg_;
  asio::io_context ioc_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::buffer_body>> streamParser_;
  std::atomic<bool> cancelled_{false};
  bool broken_ = false;
  bool resumed_ = false;
};

}  // namespace tally::runtime::detail
