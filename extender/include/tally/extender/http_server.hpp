#pragma once
// A small HTTP/1.1 server on Boost.Beast: threads that each run their own
// io_context (a connection stays on the thread that accepted it, so a request
// is read, answered and written without handing it to another thread),
// keep-alive, optional TLS, a body limit (413), a timeout while waiting for a
// request (idle) and while reading one (read), 404 for unknown paths and 405
// for known paths with another method. A body that has not fully arrived with
// its header is awaited with the socket's receive low-water mark
// (SO_RCVLOWAT) set to the bytes missing, so the thread wakes once for it
// rather than once per TCP segment. Knows nothing about extenders: routes map
// a method and a path to a handler.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::extender {

struct HttpRequest {
  std::string method;
  std::string path;  // without the query
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string contentType = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// A 4xx/5xx answer whose body is {"Error": message}, as kube-scheduler reads it.
HttpResponse errorResponse(int status, std::string_view message);

// Handlers may answer inline or later, from any thread, exactly once.
using Respond = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest&, Respond)>;

class Router {
 public:
  // `label` names the route in metrics ("filter", "healthz", ...).
  void add(std::string method, std::string path, std::string label, Handler handler);

  struct Match {
    const Handler* handler = nullptr;
    std::string_view label = "unknown";
    int status = 200;    // 404 or 405 when no handler
    std::string allow;  // for 405
  };
  Match match(std::string_view method, std::string_view path) const;

 private:
  struct Route {
    std::string label;
    std::map<std::string, Handler, std::less<>> byMethod;
  };
  std::map<std::string, Route, std::less<>> routes_;
};

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port())
  unsigned threads = 2;
  std::size_t maxBodyBytes = 16 << 20;
  std::size_t maxHeaderBytes = 16 << 10;
  std::chrono::milliseconds readTimeout{10'000};  // reading one request once it started, and writing the answer
  std::chrono::milliseconds idleTimeout{90'000};  // waiting for the next request on a kept-alive connection
  std::string tlsCertFile;  // both set: HTTPS
  std::string tlsKeyFile;
};

// What the server tells its owner about every exchange.
struct HttpObserver {
  // A response was sent: route label, status, seconds from the request's
  // header read to the response ready, and the part of it after the whole
  // body was read (the handler's own time, without waiting for the client).
  std::function<void(std::string_view route, int status, double seconds, double handlingSeconds)> onResponse;
  // A request that never reached a handler: "body_too_large", "timeout",
  // "not_found", "method_not_allowed", "malformed_http", "tls_handshake".
  std::function<void(std::string_view kind)> onRejected;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Router router, HttpObserver observer = {});
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the threads; throws std::runtime_error naming the
  // address, or a TLS file that cannot be loaded.
  void start();
  void stop();
  std::uint16_t port() const;
  bool tls() const;
  // Reads it took to complete the bodies of plain-TCP requests whose body had
  // not fully arrived with the header (one per request when the low-water mark
  // does its job). For tests and diagnostics.
  std::uint64_t bodyCompletionReads() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally::extender
