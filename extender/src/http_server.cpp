#include "tally/extender/http_server.hpp"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>
#include <stdexcept>
#include <thread>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "tally/common/thread_name.hpp"
#include "tally/extender/wire.hpp"

namespace tally::extender {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

void Router::add(std::string method, std::string path, std::string label, Handler handler) {
  Route& route = routes_[path];
  route.label = std::move(label);
  route.byMethod[std::move(method)] = std::move(handler);
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match m;
  auto route = routes_.find(path);
  if (route == routes_.end()) {
    m.status = 404;
    return m;
  }
  m.label = route->second.label;
  auto handler = route->second.byMethod.find(method);
  if (handler == route->second.byMethod.end()) {
    m.status = 405;
    for (const auto& [name, h] : route->second.byMethod) m.allow += (m.allow.empty() ? "" : ", ") + name;
    return m;
  }
  m.handler = &handler->second;
  return m;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  Router router;
  HttpObserver observer;
  // One io_context per thread, each run by that thread alone; the acceptor
  // lives on the first and deals accepted connections out in turn.
  std::vector<std::unique_ptr<net::io_context>> contexts;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> keepRunning;
  std::size_t nextContext = 0;
  std::optional<ssl::context> tlsContext;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<bool> running{false};
  std::atomic<std::uint64_t> bodyCompletionReads{0};
  std::uint16_t boundPort = 0;

  void reject(std::string_view kind) {
    if (observer.onRejected) observer.onRejected(kind);
  }
  void responded(std::string_view route, int status, double seconds, double handlingSeconds) {
    if (observer.onResponse) observer.onResponse(route, status, seconds, handlingSeconds);
  }
  void accept();
};

HttpResponse errorResponse(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = wire::encodeError(message);
  return r;
}

namespace {

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(HttpServer::Impl& server, Stream stream) : server_(server), stream_(std::move(stream)) {}

  void run() {
    if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
      readHeader();
    } else {
      beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          self->server_.reject("tls_handshake");
          return self->close();
        }
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
    beast::get_lowest_layer(stream_).expires_after(first_ ? server_.options.readTimeout : server_.options.idleTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->onHeader(ec); });
  }

  void onHeader(beast::error_code ec) {
    if (ec) return readFailed(ec);
    started_ = Clock::now();
    if (auto length = parser_->content_length()) {
      if (*length > server_.options.maxBodyBytes) return tooLarge();
      // Room for simdjson's padding, so the body is parsed where it lands.
      parser_->get().body().reserve(*length + 64);
      // Beast reads as much as the buffer has room for; a flat_buffer left at
      // its first 512 bytes would take a 70 KB request in 140 system calls.
      buffer_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, 1u << 20)));
      if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
        // What the buffer holds past the header is body (or, pipelined, more).
        if (*length > buffer_.size()) return awaitBody(static_cast<std::size_t>(*length - buffer_.size()));
      }
    }
    readBody();
  }

  void readBody() {
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code e, std::size_t) { self->onBody(e); });
  }

  // Plain TCP only: read the `missing` body bytes into the buffer with the
  // socket's low-water mark at exactly what is still to come, so the kernel
  // reports the socket readable once all of it is queued (Go's HTTP client,
  // kube-scheduler's, writes a request's first 4 KB and the rest separately).
  // The mark never exceeds what the client still owes, so it cannot hold back
  // a read that should complete; a client that owes more than it sends meets
  // the read timeout as before. (Behind TLS the engine reads ahead of the
  // plaintext, so the count would not be exact there: not used.)
  void awaitBody(std::size_t missing) {
    setLowWater(missing);
    ++server_.bodyCompletionReads;
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    stream_.async_read_some(buffer_.prepare(missing), [self = this->shared_from_this(), missing](
                                                          beast::error_code ec, std::size_t n) {
      self->buffer_.commit(n);
      if (!ec && n < missing) return self->awaitBody(missing - n);
      self->setLowWater(1);
      if (ec) return self->readFailed(ec);
      self->readBody();  // parses what the buffer now holds
    });
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
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted) {
      return close();
    }
    if (ec == beast::error::timeout) {
      // The stream closed the socket when its timer fired; a client that
      // started a request and stalled is counted, an idle kept-alive one is not.
      if (first_ || buffer_.size() > 0 || (parser_ && parser_->is_header_done())) server_.reject("timeout");
      return close();
    }
    if (ec == http::error::body_limit || ec == http::error::header_limit) return tooLarge();
    server_.reject("malformed_http");
    closeAfter_ = true;
    write("malformed", errorResponse(400, std::string("malformed HTTP request: ") + ec.message()));
  }

  void tooLarge() {
    server_.reject("body_too_large");
    closeAfter_ = true;
    write("rejected", errorResponse(413, "request body exceeds the limit of " +
                                             std::to_string(server_.options.maxBodyBytes) + " bytes"));
  }

  void onBody(beast::error_code ec) {
    if (ec) return readFailed(ec);
    bodyRead_ = Clock::now();
    auto& req = parser_->get();
    keepAlive_ = req.keep_alive();
    request_.method = std::string(req.method_string());
    std::string_view target(req.target().data(), req.target().size());
    request_.path = std::string(target.substr(0, target.find('?')));
    request_.body = std::move(req.body());
    Router::Match m = server_.router.match(request_.method, request_.path);
    if (!m.handler) {
      server_.reject(m.status == 404 ? "not_found" : "method_not_allowed");
      HttpResponse r = errorResponse(m.status, m.status == 404 ? "no such path: " + request_.path
                                                               : request_.method + " is not allowed on " + request_.path);
      if (m.status == 405) r.headers.emplace_back("Allow", m.allow);
      return write(m.label, std::move(r));
    }
    route_ = std::string(m.label);
    auto self = this->shared_from_this();
    Respond respond = [self](HttpResponse response) {
      net::dispatch(self->stream_.get_executor(),
                    [self, response = std::move(response)]() mutable { self->write(self->route_, std::move(response)); });
    };
    try {
      (*m.handler)(request_, std::move(respond));
    } catch (const std::exception& e) {
      write(route_, errorResponse(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      write(route_, errorResponse(500, "internal error"));
    }
  }

  void write(std::string_view route, HttpResponse r) {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - started_).count();
    // Refused before the body was read: no handling to speak of.
    const double handling =
        bodyRead_ != Clock::time_point{} ? std::chrono::duration<double>(now - bodyRead_).count() : 0.0;
    server_.responded(route, r.status, seconds, handling);
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::server, "tally-extender");
    response_.set(http::field::content_type, r.contentType);
    for (auto& [k, v] : r.headers) response_.set(k, v);
    response_.body() = std::move(r.body);
    response_.keep_alive(keepAlive_ && !closeAfter_);
    response_.prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    http::async_write(stream_, response_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
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

  HttpServer::Impl& server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  HttpRequest request_;
  std::string route_;
  Clock::time_point started_ = Clock::now();
  Clock::time_point bodyRead_{};
  bool first_ = true;
  bool keepAlive_ = true;
  bool closeAfter_ = false;
  int lowWater_ = 1;  // the socket's SO_RCVLOWAT as last set
};

}  // namespace

void HttpServer::Impl::accept() {
  net::io_context& home = *contexts[nextContext];
  nextContext = (nextContext + 1) % contexts.size();
  acceptor->async_accept(home, [this](beast::error_code ec, tcp::socket socket) {
    if (!running.load()) return;
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      // The session starts on its own thread; this one only accepts.
      auto startOn = [executor = socket.get_executor()](auto session) {
        net::post(executor, [session] { session->run(); });
      };
      if (tlsContext) {
        startOn(std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
            *this, beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tlsContext)));
      } else {
        startOn(std::make_shared<Session<beast::tcp_stream>>(*this, beast::tcp_stream(std::move(socket))));
      }
    }
    accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options, Router router, HttpObserver observer)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->router = std::move(router);
  impl_->observer = std::move(observer);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& s = *impl_;
  const auto& o = s.options;
  if (!o.tlsCertFile.empty() || !o.tlsKeyFile.empty()) {
    if (o.tlsCertFile.empty() || o.tlsKeyFile.empty()) {
      throw std::runtime_error("TLS needs both --tls-cert-file and --tls-key-file");
    }
    s.tlsContext.emplace(ssl::context::tls_server);
    s.tlsContext->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                              ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    beast::error_code ec;
    s.tlsContext->use_certificate_chain_file(o.tlsCertFile, ec);
    if (ec) throw std::runtime_error("cannot load TLS certificate " + o.tlsCertFile + ": " + ec.message());
    s.tlsContext->use_private_key_file(o.tlsKeyFile, ssl::context::pem, ec);
    if (ec) throw std::runtime_error("cannot load TLS key " + o.tlsKeyFile + ": " + ec.message());
  }
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
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + o.address + ":" + std::to_string(o.port) + ": " + ec.message());
  s.boundPort = s.acceptor->local_endpoint().port();
  s.running.store(true);
  s.accept();
  for (unsigned i = 0; i < n; ++i) {
    s.threads.emplace_back([&s, i] { s.contexts[i]->run(); });
    nameThread(s.threads.back().native_handle(), "tally-http-" + std::to_string(i));
  }
}

void HttpServer::stop() {
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

std::uint64_t HttpServer::bodyCompletionReads() const { return impl_->bodyCompletionReads.load(); }

std::uint16_t HttpServer::port() const { return impl_->boundPort; }
bool HttpServer::tls() const { return impl_->tlsContext.has_value(); }

}  // namespace tally::extender
