#include "connection.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <charconv>

namespace tally::runtime::detail {

namespace {
// Where an SSL_CTX points back at its TlsContext. Not the "app data" slot:
// Asio's ssl::context keeps its verify callback there and deletes it.
int tlsContextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL calls this with every session ticket the server sends (TLS 1.3 sends
// them after the handshake). The session is the connection's own object, which
// OpenSSL marks not resumable if that connection later fails: a copy is kept
// instead, and 0 returned (OpenSSL drops the reference it lent).
int keepNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* tls = static_cast<TlsContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tlsContextIndex()));
  if (tls) {
    if (SSL_SESSION* copy = SSL_SESSION_dup(session)) tls->keep(copy);
  }
  return 0;
}
}  // namespace

TlsContext::TlsContext() {
  SSL_CTX* raw = ctx.native_handle();
  SSL_CTX_set_ex_data(raw, tlsContextIndex(), this);
  // Client-side caching is what makes OpenSSL report new sessions; its own
  // store is not used (one session, kept here, is enough for one server).
  SSL_CTX_set_session_cache_mode(raw, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(raw, keepNewSession);
}

TlsContext::~TlsContext() {
  if (session_) SSL_SESSION_free(session_);
}

void TlsContext::offer(SSL* ssl) {
  // Each connection resumes from its own copy: whatever becomes of that
  // connection (OpenSSL retires the session of one that fails or ends without
  // a close_notify), the kept session stays good for the next.
  SSL_SESSION* copy = nullptr;
  {
    std::lock_guard lock(mu_);
    if (session_ && SSL_SESSION_is_resumable(session_)) copy = SSL_SESSION_dup(session_);
  }
  if (!copy) return;
  SSL_set_session(ssl, copy);  // takes a reference of its own
  SSL_SESSION_free(copy);
}

void TlsContext::keep(SSL_SESSION* session) {
  std::lock_guard lock(mu_);
  if (session_) SSL_SESSION_free(session_);
  session_ = session;
}

Result<std::unique_ptr<TlsContext>> makeTlsContext(const ClusterConfig& cfg) {
  auto tls = std::make_unique<TlsContext>();
  beast::error_code ec;
  if (cfg.insecureSkipTlsVerify) {
    tls->ctx.set_verify_mode(asio::ssl::verify_none);
  } else {
    tls->ctx.set_verify_mode(asio::ssl::verify_peer);
    if (cfg.caPem.empty()) {
      tls->ctx.set_default_verify_paths(ec);
    } else {
      tls->ctx.add_certificate_authority(asio::buffer(cfg.caPem), ec);
    }
    if (ec) return Error(ErrorCode::kTls, "loading CA: " + ec.message());
  }
  if (!cfg.clientCertPem.empty()) {
    tls->ctx.use_certificate_chain(asio::buffer(cfg.clientCertPem), ec);
    if (ec) return Error(ErrorCode::kTls, "loading client certificate: " + ec.message());
    tls->ctx.use_private_key(asio::buffer(cfg.clientKeyPem), asio::ssl::context::pem, ec);
    if (ec) return Error(ErrorCode::kTls, "loading client key: " + ec.message());
  }
  return tls;
}

Connection::Connection(TlsContext& tls, const ClusterConfig& cfg) : tls_(tls), cfg_(cfg), stream_(ioc_, tls.ctx) {}

Connection::~Connection() {
  beast::error_code ec;
  beast::get_lowest_layer(stream_).socket().close(ec);
}

template <class Start>
beast::error_code Connection::run(Start&& start, std::chrono::milliseconds timeout) {
  if (cancelled_.load()) return asio::error::operation_aborted;
  beast::error_code result = asio::error::would_block;
  beast::get_lowest_layer(stream_).expires_after(timeout);
  start([&result](beast::error_code ec, auto&&...) { result = ec; });
  ioc_.restart();
  ioc_.run();
  if (result && result != http::error::need_buffer) broken_ = true;
  return result;
}

Error Connection::netError(const beast::error_code& ec, std::string_view op) const {
  ErrorCode code = ErrorCode::kNetwork;
  if (ec == beast::error::timeout) code = ErrorCode::kTimeout;
  if (ec == asio::error::operation_aborted || cancelled_.load()) code = ErrorCode::kCancelled;
  if (ec.category() == asio::error::get_ssl_category()) code = ErrorCode::kTls;
  return Error(code, std::string(op) + " " + cfg_.host + ":" + cfg_.port + ": " + ec.message());
}

Status Connection::connect() {
  asio::ip::tcp::resolver resolver(ioc_);
  beast::error_code ec;
  auto endpoints = resolver.resolve(cfg_.host, cfg_.port, ec);
  if (ec) return netError(ec, "resolve");
  ec = run([&](auto handler) { beast::get_lowest_layer(stream_).async_connect(endpoints, handler); },
           cfg_.connectTimeout);
  if (ec) return netError(ec, "connect");
  beast::get_lowest_layer(stream_).socket().set_option(asio::ip::tcp::no_delay(true), ec);

  const std::string& name = cfg_.tlsServerName.empty() ? cfg_.host : cfg_.tlsServerName;
  SSL* ssl = stream_.native_handle();
  asio::ip::make_address(name, ec);
  const bool isIp = !ec;
  if (!isIp) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (!cfg_.insecureSkipTlsVerify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    const int set =
        isIp ? X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) : X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
    if (set != 1) return Error(ErrorCode::kTls, "cannot verify server name " + name);
  }
  tls_.offer(ssl);
  ec =
      run([&](auto handler) { stream_.async_handshake(asio::ssl::stream_base::client, handler); }, cfg_.connectTimeout);
  if (ec) return netError(ec, "TLS handshake with");
  resumed_ = SSL_session_reused(ssl) == 1;
  return {};
}

Status Connection::write(http::request<http::string_body>& req) {
  auto ec = run([&](auto handler) { http::async_write(stream_, req, handler); }, cfg_.requestTimeout);
  if (ec) return netError(ec, "write to");
  return {};
}

Result<http::response<http::string_body>> Connection::readResponse(std::chrono::milliseconds timeout) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 31);
  auto ec = run([&](auto handler) { http::async_read(stream_, buffer_, parser, handler); }, timeout);
  if (ec) return netError(ec, "read from");
  return parser.release();
}

Result<ResponseHead> Connection::readHead(std::chrono::milliseconds timeout) {
  streamParser_.emplace();
  streamParser_->body_limit(boost::none);
  auto ec = run([&](auto handler) { http::async_read_header(stream_, buffer_, *streamParser_, handler); }, timeout);
  if (ec) return netError(ec, "read from");
  const auto& msg = streamParser_->get();
  ResponseHead head;
  head.status = static_cast<int>(msg.result_int());
  head.contentType = std::string(msg[http::field::content_type]);
  head.keepAlive = msg.keep_alive();
  const auto ra = msg[http::field::retry_after];
  std::from_chars(ra.data(), ra.data() + ra.size(), head.retryAfter);
  return head;
}

Result<size_t> Connection::readBody(char* buf, size_t size, std::chrono::milliseconds idleTimeout) {
  if (!streamParser_ || streamParser_->is_done()) return size_t{0};
  auto& body = streamParser_->get().body();
  body.data = buf;
  body.size = size;
  auto ec = run([&](auto handler) { http::async_read_some(stream_, buffer_, *streamParser_, handler); }, idleTimeout);
  if (ec && ec != http::error::need_buffer) {
    if (ec == http::error::end_of_stream) return size_t{0};
    return netError(ec, "watch read from");
  }
  const size_t got = size - body.size;
  if (got == 0 && !streamParser_->is_done()) {
    // Header-only progress (e.g. a chunk header); ask again.
    return readBody(buf, size, idleTimeout);
  }
  return got;
}

void Connection::cancel() {
  cancelled_.store(true);
  asio::post(ioc_, [this] { beast::get_lowest_layer(stream_).socket().cancel(); });
}

bool Connection::reusable() {
  if (broken_ || cancelled_.load() || buffer_.size() != 0) return false;
  auto& sock = beast::get_lowest_layer(stream_).socket();
  if (!sock.is_open()) return false;
  pollfd pfd{sock.native_handle(), POLLIN, 0};
  // Readable while idle means EOF, a reset or stray bytes: not reusable.
  return ::poll(&pfd, 1, 0) == 0;
}

}  // namespace tally::runtime::detail
