#pragma once
// An HTTP/1.1 server on Boost.Beast, optionally over TLS, for both binaries:
// the extender's verbs and the controller's webhooks. Threads each run their
// own io_context (a connection stays on the thread that accepted it, so a
// request is read, answered and written without handing it to another
// thread), keep-alive, a body limit (413), timeouts for the first request's
// header, for reading a request and for waiting on a kept-alive connection,
// 404 for unknown paths and 405 for known paths with another method. A body
// that has not fully arrived with its header is awaited, on plain TCP, with
// the socket's receive low-water mark (SO_RCVLOWAT) set to the bytes missing,
// so the thread wakes once for it rather than once per TCP segment.
//
// TLS serves a certificate and key read from files, and re-reads them when
// they change (serving certificates rotate): new connections get the new
// certificate, open ones keep theirs, and files that cannot be loaded leave
// the previous certificate in place (logged through tally::logWarning).
//
// Mutual TLS: with client certificates configured the handshake asks every
// client for one and verifies what it presents (chain to the configured CAs,
// the clientAuth purpose); a route that wants a verified caller answers 401
// to a connection that presented none and 403 to one whose names are not
// allowed, before its handler runs. TLS 1.2 or newer, forward-secret AEAD
// ciphers only.
//
// Bounded: at most maxConnections open connections (more are closed as they
// are accepted), and a body's memory follows the bytes that arrived, not the
// Content-Length a client declares.
//
// Knows nothing about what it serves: routes map a method and a path to a
// handler, and the owner says how an error body looks.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally::runtime::http {

struct QueryParam {
  std::string key;
  std::string value;
};

namespace detail {
struct RequestAccess;
}

// The verified client certificate of a connection (mutual TLS).
struct ClientIdentity {
  std::string commonName;             // the subject's CN, empty without one
  std::vector<std::string> dnsNames;  // subjectAltName DNS entries
  std::string subject;                // the whole subject, for logs
};

// One request as a handler sees it. Valid until the handler responds (the
// session reuses it for the next request); a handler answering later keeps
// what it needs, typically by moving the body out.
class Request {
 public:
  Request() = default;
  // For handler tests: a request with this target ("/path?query") and no headers.
  Request(std::string method, std::string_view target, std::string body = {});

  std::string_view method() const { return method_; }
  // The target's path, as sent (not percent-decoded), without the query.
  std::string_view path() const { return path_; }
  // What follows '?' in the target, as sent; empty without one.
  std::string_view rawQuery() const { return query_; }
  // The query as key/value pairs in the order sent, '+' and %XX decoded; a
  // key without '=' has an empty value. Parsed on first use.
  const std::vector<QueryParam>& queryParams() const;
  // The first value of `key`, if present.
  std::optional<std::string_view> query(std::string_view key) const;
  // The first header field named `name`, compared case-insensitively.
  std::optional<std::string_view> header(std::string_view name) const;
  // The caller's verified client certificate; null when the connection
  // presented none (or is not TLS).
  const ClientIdentity* client() const { return client_; }
  // Mutable: handlers parse it in place (it has room for simdjson's padding
  // when it came with a Content-Length) or move it out.
  std::string& body() { return body_; }
  const std::string& body() const { return body_; }

 private:
  friend struct detail::RequestAccess;
  std::string method_;
  std::string path_;
  std::string query_;
  std::string body_;
  mutable std::optional<std::vector<QueryParam>> params_;
  // The parsed message's header fields (Beast's, kept opaque here), owned by
  // the session; null for a request built by hand.
  const void* fields_ = nullptr;
  const ClientIdentity* client_ = nullptr;
};

struct Response {
  int status = 200;
  std::string body;
  std::string contentType = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// Handlers may answer inline or later, from any thread, exactly once.
using Respond = std::function<void(Response)>;
using Handler = std::function<void(Request&, Respond)>;

// The body of an answer the server gives itself (400, 404, 405, 413, 500)
// and, by convention, of the owner's own errors.
using ErrorBody = std::function<Response(int status, std::string_view message)>;
// The default: the message as text/plain, with a newline.
Response plainErrorBody(int status, std::string_view message);

// Who may call a route.
enum class Caller {
  Anyone,          // the handler decides (health probes, bearer tokens it reviews itself)
  VerifiedClient,  // a client certificate the server verified, with an allowed name
};

class Router {
 public:
  // `label` names the route in metrics ("filter", "healthz", ...).
  void add(std::string method, std::string path, std::string label, Handler handler, Caller caller = Caller::Anyone);

  struct Match {
    const Handler* handler = nullptr;
    std::string_view label = "unknown";
    int status = 200;   // 404 or 405 when no handler
    std::string allow;  // for 405
    Caller caller = Caller::Anyone;
  };
  Match match(std::string_view method, std::string_view path) const;
  // The label of a route that wants a verified client, if any.
  std::optional<std::string> firstVerifiedRoute() const;

 private:
  struct Entry {
    Handler handler;
    Caller caller = Caller::Anyone;
  };
  struct Route {
    std::string label;
    std::map<std::string, Entry, std::less<>> byMethod;
  };
  std::map<std::string, Route, std::less<>> routes_;
};

// The client certificates a TLS server asks for.
struct ClientCertificates {
  std::string caFile;  // PEM bundle of the CAs that sign callers' certificates
  // A caller of a Caller::VerifiedClient route must carry one of these as its
  // subject CN or a DNS subjectAltName; empty: any certificate caFile verifies.
  std::vector<std::string> allowedNames;
};

struct TlsFiles {
  std::string certFile;  // PEM chain, the serving certificate first
  std::string keyFile;   // PEM private key
  // Set: mutual TLS (the CA file is reloaded with the certificate).
  std::optional<ClientCertificates> clients;
  // How often, at most, an accepted connection makes the server look at the
  // files' inode, size and mtime (two stat calls); 0: on every accept.
  std::chrono::milliseconds reloadCheckInterval{1'000};
};

struct ServerOptions {
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;  // 0: an ephemeral port (see Server::port())
  unsigned threads = 2;
  std::string threadName = "tally-http";  // threads are <threadName>-0, -1, ...
  std::string serverHeader = "tally";     // the Server field of every response
  std::size_t maxBodyBytes = 16 << 20;
  std::size_t maxHeaderBytes = 16 << 10;
  // Open connections at most; one accepted beyond it is closed at once
  // (counted as rejected "connection_limit").
  std::size_t maxConnections = 1024;
  // The TLS handshake and the first request's header on a new connection;
  // 0: readTimeout.
  std::chrono::milliseconds headerTimeout{0};
  // Reading one request once its header is in, and writing the answer.
  std::chrono::milliseconds readTimeout{10'000};
  // Waiting for (and reading the header of) the next request on a kept-alive connection.
  std::chrono::milliseconds idleTimeout{90'000};
  std::optional<TlsFiles> tls;  // set: HTTPS only
  ErrorBody errorBody = plainErrorBody;
};

// What the server tells its owner about every exchange.
struct Observer {
  // A response was sent: route label, status, seconds from the request's
  // header read to the response ready, and the part of it after the whole
  // body was read (the handler's own time, without waiting for the client).
  std::function<void(std::string_view route, int status, double seconds, double handlingSeconds)> onResponse;
  // A request that never reached a handler: "body_too_large", "timeout",
  // "not_found", "method_not_allowed", "malformed_http", "tls_handshake",
  // "connection_limit", "unauthenticated" (no client certificate),
  // "forbidden" (a client certificate whose names are not allowed).
  std::function<void(std::string_view kind)> onRejected;
};

class Server {
 public:
  Server(ServerOptions options, Router router, Observer observer = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts the threads; throws std::runtime_error naming the
  // address, a TLS file that cannot be loaded, or a route that wants verified
  // clients on a server configured with no client certificates.
  void start();
  void stop();
  std::uint16_t port() const;
  bool tls() const;
  // Reads it took to complete the bodies of plain-TCP requests whose body had
  // not fully arrived with the header (one per request when the low-water mark
  // does its job). For tests and diagnostics.
  std::uint64_t bodyCompletionReads() const;
  // Connections open now.
  std::size_t openConnections() const;

  struct CertificateStats {
    std::uint64_t reloads = 0;   // changed files loaded and served to new connections
    std::uint64_t failures = 0;  // changed files that could not be loaded (the previous certificate stayed)
  };
  CertificateStats certificateStats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tally::runtime::http
