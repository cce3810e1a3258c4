#include "tally/runtime/http/server.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "request_access.hpp"
#include "serving_certificate.hpp"
#include "tally/common/thread_name.hpp"

namespace tally::runtime::http {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Server::Impl {
  ServerOptions options;
  Router router;
  Observer observer;
  // Sessions count themselves out when destroyed, which may be when the
  // contexts below are: declared before them.
  std::atomic<std::size_t> openConnections{0};
  // One io_context per thread, each run by that thread alone; the acceptor
  // lives on the first and deals accepted connections out in turn.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keepRunning;
  std::size_t nextContext = 0;
  std::optional<detail::ServingCertificate> certificate;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<bool> running{false};
  std::atomic<std::uint64_t> bodyCompletionReads{0};
  std::optional<net::steady_timer> acceptRetry;  // after accept fails (descriptors exhausted)
  std::uint16_t boundPort = 0;

  void reject(std::string_view kind) {
    if (observer.onRejected) observer.onRejected(kind);
  }
  void responded(std::string_view route, int status, double seconds, double handlingSeconds) {
    if (observer.onResponse) observer.onResponse(route, status, seconds, handlingSeconds);
  }
  std::chrono::milliseconds headerTimeout() const {
    return options.headerTimeout.count() > 0 ? options.headerTimeout : options.readTimeout;
  }
  void accept();

  // Why the caller of a route that wants a verified client may not call it:
  // {401 or 403, message}; nullopt: it may.
  std::optional<std::pair<int, std::string>> refuseCaller(const ClientIdentity* client, std::string_view route) const {
    if (!client) {
      return std::make_pair(401,
                            "this route needs a client certificate signed by the configured client CA; the "
                            "connection presented none");
    }
    const auto& allowed = options.tls->clients->allowedNames;
    if (allowed.empty()) return std::nullopt;
    for (const auto& name : allowed) {
      if (name == client->commonName) return std::nullopt;
      for (const auto& dns : client->dnsNames)
        if (name == dns) return std::nullopt;
    }
    std::string names;
    for (const auto& name : allowed) names += (names.empty() ? "" : ", ") + name;
    return std::make_pair(403, "client certificate " + client->subject + " may not call " + std::string(route) +
                                   " (allowed: " + names + ")");
  }
};

namespace {

// The names of the client certificate the handshake verified, if any.
std::optional<ClientIdentity> verifiedClient(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (!cert || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  ClientIdentity id;
  X509_NAME* subject = X509_get_subject_name(cert);
  char buffer[512] = {};
  if (X509_NAME_get_text_by_NID(subject, NID_commonName, buffer, sizeof buffer) > 0) id.commonName = buffer;
  if (char* line = X509_NAME_oneline(subject, nullptr, 0)) {
    id.subject = line;
    OPENSSL_free(line);
  }
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_DNS) continue;
    const ASN1_IA5STRING* dns = name->d.dNSName;
    id.dnsNames.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                             static_cast<std::size_t>(ASN1_STRING_length(dns)));
  }
  GENERAL_NAMES_free(names);
  return id;
}

// Behind TLS, how much one body read asks for: a record's worth.
constexpr std::size_t kTlsBodyChunk = 16 << 10;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  // The caller counted the connection in server.openConnections.
  Session(Server::Impl& server, Stream stream, std::shared_ptr<ssl::context> tls = nullptr)
      : server_(server), stream_(std::move(stream)), tls_(std::move(tls)) {}
  ~Session() { server_.openConnections.fetch_sub(1); }

  void run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      readHeader();
    } else {
      beast::get_lowest_layer(stream_).expires_after(server_.headerTimeout());
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          self->server_.reject("tls_handshake");
          return self->close();
        }
        self->client_ = verifiedClient(self->stream_.native_handle());
        self->readHeader();
      });
    }
  }

 private:
  void readHeader() {
    bodyRead_ = {};  // the last request's; a refusal of this one has no handling time
    parser_.emplace();
    parser_->body_limit(server_.options.maxBodyBytes);
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.maxHeaderBytes));
    beast::get_lowest_layer(stream_).expires_after(first_ ? server_.headerTimeout() : server_.options.idleTimeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->onHeader(ec); });
  }

  void onHeader(beast::error_code ec) {
    if (ec) return readFailed(ec);
    started_ = Clock::now();
    if (auto length = parser_->content_length()) {
      if (*length > server_.options.maxBodyBytes) return tooLarge();
      // What the buffer holds past the header is body (or, pipelined, more).
      // The rest is read into the buffer as it arrives, before the parser
      // sees the body: Beast's string body reserves the whole declared
      // length when it starts, which is only safe once the bytes are here.
      if (*length > buffer_.size()) {
        ++server_.bodyCompletionReads;
        return awaitBody(static_cast<std::size_t>(*length - buffer_.size()));
      }
    }
    readBody();
  }

  void readBody() {
    // Room for simdjson's padding, so the body is parsed where it lands.
    if (auto length = parser_->content_length()) parser_->get().body().reserve(*length + 64);
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code e, std::size_t) { self->onBody(e); });
  }

  // Reads the `missing` body bytes into the buffer, memory following what
  // arrived. Plain TCP: the socket's low-water mark is set to exactly what is
  // still to come, so the kernel reports the socket readable once all of it
  // is queued (Go's HTTP client, kube-scheduler's, writes a request's first
  // 4 KB and the rest separately); one byte is read asynchronously and what
  // the socket then holds at once. The mark never exceeds what the client
  // still owes, so it cannot hold back a read that should complete; a client
  // that owes more than it sends meets the read timeout. Behind TLS the engine
  // reads ahead of the plaintext, so no mark: a record's worth at a time.
  void awaitBody(std::size_t missing) {
    setLowWater(missing);
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    const std::size_t ask = std::is_same_v<Stream, beast::tcp_stream> ? 1 : std::min(missing, kTlsBodyChunk);
    stream_.async_read_some(buffer_.prepare(ask),
                            [self = this->shared_from_this(), missing](beast::error_code ec, std::size_t n) {
                              self->buffer_.commit(n);
                              if (!ec) n += self->drainQueued(missing - n);
                              if (!ec && n < missing) return self->awaitBody(missing - n);
                              self->setLowWater(1);
                              if (ec) return self->readFailed(ec);
                              self->readBody();  // parses what the buffer now holds
                            });
  }

  // Plain TCP: reads, without waiting, up to `want` bytes the socket already
  // holds; returns how many.
  std::size_t drainQueued(std::size_t want) {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      if (want == 0) return 0;
      auto& socket = stream_.socket();
      beast::error_code ec;
      const std::size_t queued = std::min(want, socket.available(ec));
      if (ec || queued == 0) return 0;
      const std::size_t n = socket.read_some(buffer_.prepare(queued), ec);
      buffer_.commit(ec ? 0 : n);
      return ec ? 0 : n;
    } else {
      (void)want;
      return 0;
    }
  }

  void setLowWater(std::size_t bytes) {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      // The kernel caps the mark at half the receive buffer; a larger body is
      // then read in a few pieces. Failure only costs wake-ups.
      int mark = static_cast<int>(std::min<std::size_t>(bytes, 1u << 20));
      if (mark == lowWater_) return;
      const int fd = stream_.socket().native_handle();
      if (::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof mark) == 0) lowWater_ = mark;
      if (mark > 1) {
        // Unread data delays the kernel's ACK (up to 40 ms), and a client with
        // Nagle's algorithm on holds the rest of its body until that ACK
        // comes: acknowledge what arrives at once while the mark is up.
        int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
      }
    }
  }

  void readFailed(beast::error_code ec) {
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted) {
      return close();
    }
    if (ec == beast::error::timeout) {
      // The stream closed the socket when its timer fired; a client that
      // started a request and stalled is counted, an idle kept-alive one is
      // not. No TLS close_notify on a socket that is gone: the socket is closed
      // at once (a shutdown would wait on it and leave a client that just sent
      // its next request on this connection waiting for an answer).
      if (first_ || buffer_.size() > 0 || (parser_ && parser_->is_header_done())) server_.reject("timeout");
      beast::error_code ignored;
      beast::get_lowest_layer(stream_).socket().close(ignored);
      return;
    }
    if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit) return tooLarge();
    server_.reject("malformed_http");
    closeAfter_ = true;
    write("malformed", server_.options.errorBody(400, std::string("malformed HTTP request: ") + ec.message()));
  }

  void tooLarge() {
    server_.reject("body_too_large");
    closeAfter_ = true;
    write("rejected", server_.options.errorBody(413, "request body exceeds the limit of " +
                                                         std::to_string(server_.options.maxBodyBytes) + " bytes"));
  }

  void onBody(beast::error_code ec) {
    if (ec) return readFailed(ec);
    bodyRead_ = Clock::now();
    auto& req = parser_->get();
    keepAlive_ = req.keep_alive();
    detail::RequestAccess::fill(request_, std::string_view(req.method_string().data(), req.method_string().size()),
                                std::string_view(req.target().data(), req.target().size()), std::move(req.body()),
                                req.base(), client_ ? &*client_ : nullptr);
    Router::Match m = server_.router.match(request_.method(), request_.path());
    if (!m.handler) {
      server_.reject(m.status == 404 ? "not_found" : "method_not_allowed");
      const std::string path(request_.path());
      Response r = server_.options.errorBody(
          m.status,
          m.status == 404 ? "no such path: " + path : std::string(request_.method()) + " is not allowed on " + path);
      if (m.status == 405) r.headers.emplace_back("Allow", m.allow);
      return write(m.label, std::move(r));
    }
    route_ = std::string(m.label);
    if (m.caller == Caller::VerifiedClient) {
      if (auto refusal = server_.refuseCaller(request_.client(), route_)) {
        server_.reject(refusal->first == 401 ? "unauthenticated" : "forbidden");
        Response r = server_.options.errorBody(refusal->first, refusal->second);
        if (refusal->first == 401) r.headers.emplace_back("WWW-Authenticate", "Mutual TLS");
        return write(route_, std::move(r));
      }
    }
    auto self = this->shared_from_this();
    Respond respond = [self](Response response) {
      net::dispatch(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->write(self->route_, std::move(response));
      });
    };
    try {
      (*m.handler)(request_, std::move(respond));
    } catch (const std::exception& e) {
      write(route_, server_.options.errorBody(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      write(route_, server_.options.errorBody(500, "internal error"));
    }
  }

  void write(std::string_view route, Response r) {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - started_).count();
    // Refused before the body was read: no handling to speak of.
    const double handling =
        bodyRead_ != Clock::time_point{} ? std::chrono::duration<double>(now - bodyRead_).count() : 0.0;
    server_.responded(route, r.status, seconds, handling);
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(bhttp::field::server, server_.options.serverHeader);
    response_.set(bhttp::field::content_type, r.contentType);
    for (auto& [k, v] : r.headers) response_.set(k, v);
    response_.body() = std::move(r.body);
    response_.keep_alive(keepAlive_ && !closeAfter_);
    response_.prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    bhttp::async_write(stream_, response_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || !self->response_.keep_alive()) return self->close();
      self->first_ = false;
      self->readHeader();
    });
  }

  void close() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      stream_.socket().close(ec);
    } else {
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(1));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        beast::error_code ec;
        beast::get_lowest_layer(self->stream_).socket().close(ec);
      });
    }
  }

  Server::Impl& server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> response_;
  std::shared_ptr<ssl::context> tls_;  // the certificate this connection was accepted with
  Request request_;
  std::optional<ClientIdentity> client_;  // the connection's verified client certificate
  std::string route_;
  Clock::time_point started_ = Clock::now();
  Clock::time_point bodyRead_{};
  bool first_ = true;
  bool keepAlive_ = true;
  bool closeAfter_ = false;
  int lowWater_ = 1;  // the socket's SO_RCVLOWAT as last set
};

}  // namespace

void Server::Impl::accept() {
  net::io_context& home = *contexts[nextContext];
  nextContext = (nextContext + 1) % contexts.size();
  acceptor->async_accept(home, [this](beast::error_code ec, tcp::socket socket) {
    if (!running.load()) return;
    if (ec && ec != net::error::operation_aborted) {
      // Out of descriptors (or memory): the pending connection stays in the
      // backlog; try again shortly rather than spin on the error.
      acceptRetry->expires_after(std::chrono::milliseconds(100));
      acceptRetry->async_wait([this](beast::error_code waitError) {
        if (!waitError && running.load()) accept();
      });
      return;
    }
    if (!ec && openConnections.load() >= options.maxConnections) {
      reject("connection_limit");
      socket.close(ec);
      return accept();
    }
    if (!ec) {
      openConnections.fetch_add(1);
      socket.set_option(tcp::no_delay(true), ec);
      // The session starts on its own thread; this one only accepts.
      auto startOn = [executor = socket.get_executor()](auto session) {
        net::post(executor, [session] { session->run(); });
      };
      if (certificate) {
        auto context = certificate->forNewConnection();
        startOn(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            *this, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *context), context));
      } else {
        startOn(std::make_shared<Session<beast::tcp_stream>>(*this, beast::tcp_stream(std::move(socket))));
      }
    }
    accept();
  });
}

Server::Server(ServerOptions options, Router router, Observer observer) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  if (!impl_->options.errorBody) impl_->options.errorBody = plainErrorBody;
  impl_->router = std::move(router);
  impl_->observer = std::move(observer);
}

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  const auto& o = s.options;
  if (auto route = s.router.firstVerifiedRoute(); route && !(o.tls && o.tls->clients)) {
    throw std::runtime_error(*route + " needs verified client certificates, but the server has no client CA");
  }
  if (o.tls) s.certificate.emplace(*o.tls);
  beast::error_code ec;
  auto address = net::ip::make_address(o.address, ec);
  if (ec) throw std::runtime_error("invalid bind address " + o.address + ": " + ec.message());
  tcp::endpoint endpoint(address, o.port);
  unsigned n = std::max(1u, o.threads);
  for (unsigned i = 0; i < n; ++i) {
    s.contexts.push_back(std::make_unique<net::io_context>(1));
    s.keepRunning.push_back(net::make_work_guard(*s.contexts.back()));
  }
  s.acceptor.emplace(*s.contexts.front());
  s.acceptRetry.emplace(*s.contexts.front());
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    throw std::runtime_error("cannot listen on " + o.address + ":" + std::to_string(o.port) + ": " + ec.message());
  s.boundPort = s.acceptor->local_endpoint().port();
  s.running.store(true);
  s.accept();
  for (unsigned i = 0; i < n; ++i) {
    s.threads.emplace_back([&s, i] { s.contexts[i]->run(); });
    nameThread(s.threads.back().native_handle(), o.threadName + "-" + std::to_string(i));
  }
}

void Server::stop() {
  Impl& s = *impl_;
  if (!s.running.exchange(false)) return;
  net::post(s.acceptor->get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor->close(ec);
  });
  s.keepRunning.clear();
  for (auto& c : s.contexts) c->stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

std::uint64_t Server::bodyCompletionReads() const { return impl_->bodyCompletionReads.load(); }
std::size_t Server::openConnections() const { return impl_->openConnections.load(); }

std::uint16_t Server::port() const { return impl_->boundPort; }
bool Server::tls() const { return impl_->certificate.has_value(); }

Server::CertificateStats Server::certificateStats() const {
  if (!impl_->certificate) return {};
  return {impl_->certificate->reloads(), impl_->certificate->failures()};
}

}  // namespace tally::runtime::http
