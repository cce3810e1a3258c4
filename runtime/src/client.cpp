#include "tally/runtime/client.hpp"

#include <charconv>
#include <random>
#include <thread>

#include "connection.hpp"
#include "tally/common/rfc3339.hpp"
#include "tally/runtime/api_status.hpp"
#include "tally/common/log.hpp"

namespace tally::runtime {
namespace {

void appendParam(std::string& target, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  target += target.find('?') == std::string::npos ? '?' : '&';
  target += key;
  target += '=';
  target += urlEncode(value);
}

std::string_view patchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge: return "application/merge-patch+json";
    case PatchType::kJsonPatch: return "application/json-patch+json";
    case PatchType::kStrategicMerge: return "application/strategic-merge-patch+json";
    case PatchType::kApply: return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

std::chrono::milliseconds jittered(std::chrono::milliseconds base) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> dist(1.0, 1.5);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(base.count()) * dist(rng)));
}

}  // namespace

std::string urlEncode(std::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

WatchStream::WatchStream(std::unique_ptr<detail::Connection> conn, std::string contentType,
                         std::chrono::milliseconds idleTimeout)
    : conn_(std::move(conn)), contentType_(std::move(contentType)), idleTimeout_(idleTimeout), buf_(256 * 1024) {}

WatchStream::~WatchStream() = default;

Result<std::string_view> WatchStream::read() {
  auto n = conn_->readBody(buf_.data(), buf_.size(), idleTimeout_);
  if (!n) return std::move(n).error();
  return std::string_view(buf_.data(), *n);
}

void WatchStream::cancel() { conn_->cancel(); }

Client::Client(ClusterConfig config, RetryPolicy retry) : config_(std::move(config)), retry_(retry) {}
Client::~Client() = default;

Result<std::shared_ptr<Client>> Client::create(ClusterConfig config, RetryPolicy retry) {
  auto tls = detail::makeTlsContext(config);
  if (!tls) return std::move(tls).error();
  std::shared_ptr<Client> client(new Client(std::move(config), retry));
  client->tls_ = std::move(*tls);
  return client;
}

Result<std::unique_ptr<detail::Connection>> Client::acquire(bool fresh) {
  if (!fresh) {
    std::lock_guard lock(poolMu_);
    while (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      if (conn->reusable()) {
        conn->reused = true;
        return conn;
      }
    }
  }
  auto conn = std::make_unique<detail::Connection>(*tls_, config_);
  if (auto st = conn->connect(); !st) return std::move(st).error();
  (conn->resumedSession() ? tlsResumptions_ : tlsFullHandshakes_).fetch_add(1);
  return conn;
}

void Client::release(std::unique_ptr<detail::Connection> conn) {
  std::lock_guard lock(poolMu_);
  if (idle_.size() < 64) idle_.push_back(std::move(conn));  // enough for a binder's concurrent POSTs
}

Result<HttpResponse> Client::sendOnce(const HttpRequest& request, bool* retryable, bool* sent) {
  *retryable = false;
  *sent = false;
  auto conn = acquire(false);
  if (!conn) {
    *retryable = true;  // nothing reached the server
    return std::move(conn).error();
  }
  detail::http::request<detail::http::string_body> req{detail::http::string_to_verb(request.method),
                                                       target(request.target), 11};
  req.set(detail::http::field::host, config_.host);
  req.set(detail::http::field::user_agent, config_.userAgent);
  req.set(detail::http::field::accept, request.accept);
  if (config_.token) {
    auto token = config_.token->token();
    if (!token) return std::move(token).error();
    if (!token->empty()) req.set(detail::http::field::authorization, "Bearer " + *token);
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH") {
    req.set(detail::http::field::content_type,
            request.contentType.empty() ? std::string(kContentJson) : request.contentType);
    req.body() = request.body;
  }
  req.keep_alive(true);
  req.prepare_payload();

  const bool wasReused = (*conn)->reused;
  if (auto st = (*conn)->write(req); !st) {
    // A write failure on a reused connection means the server closed it
    // first; the request did not arrive.
    *retryable = wasReused || request.idempotent;
    return std::move(st).error();
  }
  *sent = true;
  auto resp = (*conn)->readResponse(config_.requestTimeout);
  if (!resp) {
    *retryable = request.idempotent;
    return std::move(resp).error();
  }
  HttpResponse out;
  out.status = static_cast<int>(resp->result_int());
  out.contentType = std::string((*resp)[detail::http::field::content_type]);
  int retryAfter = 0;
  {
    const auto ra = (*resp)[detail::http::field::retry_after];
    std::from_chars(ra.data(), ra.data() + ra.size(), retryAfter);
  }
  const bool keepAlive = resp->keep_alive();
  out.body = std::move(resp->body());
  if (keepAlive) release(std::move(*conn));
  if (out.status >= 200 && out.status < 300) return out;

  Error err = errorFromStatus(out.status, parseStatusJson(out.body), retryAfter);
  // Kubernetes clients retry 429 and 5xx that carry Retry-After (the server
  // asks for it); other 5xx only for reads.
  if (out.status == 429 || (out.status >= 500 && retryAfter > 0)) *retryable = true;
  if (out.status >= 500 && request.method == "GET") *retryable = true;
  return err;
}

Result<HttpResponse> Client::send(const HttpRequest& request) {
  auto backoff = retry_.initialBackoff;
  for (int attempt = 1;; ++attempt) {
    bool retryable = false;
    bool sent = false;
    auto resp = sendOnce(request, &retryable, &sent);
    if (resp || !retryable || attempt >= retry_.maxAttempts) {
      if (!resp) return std::move(resp).error().withContext(request.method + " " + request.target);
      return resp;
    }
    auto wait = jittered(backoff);
    if (resp.error().retryAfter.count() > 0) {
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(resp.error().retryAfter);
    }
    logInfo("retrying a request",
            {{"method", request.method}, {"target", request.target}, {"error", resp.error().describe()}});
    retries_.fetch_add(1);
    std::this_thread::sleep_for(std::min(wait, retry_.maxBackoff));
    backoff = std::min(backoff * 2, retry_.maxBackoff);
  }
}

Result<std::string> Client::get(const Resource& res, std::string_view name, std::string_view subresource) {
  HttpRequest req;
  req.target = res.objectPath(name, subresource);
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return std::move(resp->body);
}

Result<HttpResponse> Client::getAs(const Resource& res, std::string_view name, Wire wire) {
  HttpRequest req;
  req.target = res.objectPath(name);
  if (wire == Wire::kProtobuf) req.accept = kAcceptProtobufOrJson;
  return send(req);
}

Result<HttpResponse> Client::list(const Resource& res, const ListOptions& opts, Wire wire) {
  HttpRequest req;
  req.target = res.collectionPath();
  appendParam(req.target, "labelSelector", opts.labelSelector);
  appendParam(req.target, "fieldSelector", opts.fieldSelector);
  if (opts.limit > 0) appendParam(req.target, "limit", std::to_string(opts.limit));
  appendParam(req.target, "continue", opts.continueToken);
  appendParam(req.target, "resourceVersion", opts.resourceVersion);
  appendParam(req.target, "resourceVersionMatch", opts.resourceVersionMatch);
  if (wire == Wire::kProtobuf) req.accept = kAcceptProtobufOrJson;
  return send(req);
}

Result<std::string> Client::create(const Resource& res, std::string body, std::string_view subresource) {
  HttpRequest req;
  req.method = "POST";
  req.target = subresource.empty() ? res.collectionPath() : res.collectionPath() + "/" + std::string(subresource);
  req.body = std::move(body);
  req.idempotent = false;  // a replay could create twice (generateName)
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return std::move(resp->body);
}

Result<std::string> Client::update(const Resource& res, std::string_view name, std::string body,
                                   std::string_view subresource) {
  HttpRequest req;
  req.method = "PUT";
  req.target = res.objectPath(name, subresource);
  req.body = std::move(body);
  req.idempotent = true;  // the resourceVersion in the body rejects a replay
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return std::move(resp->body);
}

Result<std::string> Client::patch(const Resource& res, std::string_view name, PatchType type, std::string body,
                                  const PatchOptions& opts) {
  HttpRequest req;
  req.method = "PATCH";
  req.target = res.objectPath(name, opts.subresource);
  appendParam(req.target, "fieldManager", opts.fieldManager);
  if (opts.force) appendParam(req.target, "force", "true");
  if (opts.dryRun) appendParam(req.target, "dryRun", "All");
  req.contentType = std::string(patchContentType(type));
  req.body = std::move(body);
  // Apply and merge patches converge to the same object when replayed.
  req.idempotent = type == PatchType::kApply || type == PatchType::kMerge;
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return std::move(resp->body);
}

Result<std::string> Client::remove(const Resource& res, std::string_view name, const DeleteOptions& opts) {
  HttpRequest req;
  req.method = "DELETE";
  req.target = res.objectPath(name);
  std::string body = R"({"apiVersion":"v1","kind":"DeleteOptions")";
  if (!opts.preconditionUid.empty() || !opts.preconditionResourceVersion.empty()) {
    body += R"(,"preconditions":{)";
    bool first = true;
    if (!opts.preconditionUid.empty()) {
      body += R"("uid":)" + jsonString(opts.preconditionUid);
      first = false;
    }
    if (!opts.preconditionResourceVersion.empty()) {
      if (!first) body += ",";
      body += R"("resourceVersion":)" + jsonString(opts.preconditionResourceVersion);
    }
    body += "}";
  }
  if (opts.gracePeriodSeconds) body += R"(,"gracePeriodSeconds":)" + std::to_string(*opts.gracePeriodSeconds);
  if (!opts.propagationPolicy.empty()) body += R"(,"propagationPolicy":)" + jsonString(opts.propagationPolicy);
  body += "}";
  req.body = std::move(body);
  req.contentType = std::string(kContentJson);
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return std::move(resp->body);
}

Status Client::bindPod(std::string_view ns, std::string_view pod, std::string_view podUid, std::string_view node) {
  std::string body = R"({"apiVersion":"v1","kind":"Binding","metadata":{"name":)" + jsonString(pod);
  if (!podUid.empty()) body += R"(,"uid":)" + jsonString(podUid);
  body += R"(},"target":{"apiVersion":"v1","kind":"Node","name":)" + jsonString(node) + "}}";
  HttpRequest req;
  req.method = "POST";
  req.target = Resource::core("pods", std::string(ns)).objectPath(pod, "binding");
  req.body = std::move(body);
  req.idempotent = false;
  auto resp = send(req);
  if (!resp) return std::move(resp).error();
  return {};
}

Status Client::createEvent(const EventRecord& e) {
  const std::string ts = formatRfc3339(toUnixTime(std::chrono::system_clock::now()));
  const std::string ns = e.involved.namespace_.empty() ? "default" : e.involved.namespace_;
  std::string body = R"({"apiVersion":"v1","kind":"Event","metadata":{"generateName":)" +
                     jsonString(e.involved.name + ".") + R"(,"namespace":)" + jsonString(ns) + "}";
  body += R"(,"involvedObject":{"apiVersion":)" + jsonString(e.involved.apiVersion) + R"(,"kind":)" +
          jsonString(e.involved.kind) + R"(,"name":)" + jsonString(e.involved.name);
  if (!e.involved.namespace_.empty()) body += R"(,"namespace":)" + jsonString(e.involved.namespace_);
  if (!e.involved.uid.empty()) body += R"(,"uid":)" + jsonString(e.involved.uid);
  body += "}";
  body += R"(,"type":)" + jsonString(e.type) + R"(,"reason":)" + jsonString(e.reason) + R"(,"message":)" +
          jsonString(e.message) + R"(,"firstTimestamp":")" + ts + R"(","lastTimestamp":")" + ts +
          R"(","count":1,"source":{"component":)" + jsonString(e.reportingComponent) + "}";
  if (!e.reportingComponent.empty()) body += R"(,"reportingComponent":)" + jsonString(e.reportingComponent);
  if (!e.reportingInstance.empty()) body += R"(,"reportingInstance":)" + jsonString(e.reportingInstance);
  body += "}";
  auto r = create(Resource::core("events", ns), std::move(body));
  if (!r) return std::move(r).error();
  return {};
}

Result<std::unique_ptr<WatchStream>> Client::watch(const Resource& res, const WatchOptions& opts, Wire wire) {
  std::string path = res.collectionPath() + "?watch=true";
  appendParam(path, "labelSelector", opts.labelSelector);
  appendParam(path, "fieldSelector", opts.fieldSelector);
  appendParam(path, "resourceVersion", opts.resourceVersion);
  if (opts.allowBookmarks) appendParam(path, "allowWatchBookmarks", "true");
  if (opts.sendInitialEvents) {
    appendParam(path, "sendInitialEvents", "true");
    appendParam(path, "resourceVersionMatch", "NotOlderThan");
  }
  if (opts.timeoutSeconds > 0) appendParam(path, "timeoutSeconds", std::to_string(opts.timeoutSeconds));

  auto conn = acquire(true);  // a watch holds its connection for its lifetime
  if (!conn) return std::move(conn).error().withContext("watch " + res.describe());
  detail::http::request<detail::http::string_body> req{detail::http::verb::get, target(path), 11};
  req.set(detail::http::field::host, config_.host);
  req.set(detail::http::field::user_agent, config_.userAgent);
  req.set(detail::http::field::accept,
          wire == Wire::kProtobuf ? std::string("application/vnd.kubernetes.protobuf;stream=watch, application/json")
                                  : std::string(kContentJson));
  if (config_.token) {
    auto token = config_.token->token();
    if (!token) return std::move(token).error();
    if (!token->empty()) req.set(detail::http::field::authorization, "Bearer " + *token);
  }
  req.prepare_payload();
  if (auto st = (*conn)->write(req); !st) return std::move(st).error().withContext("watch " + res.describe());
  auto head = (*conn)->readHead(config_.requestTimeout);
  if (!head) return std::move(head).error().withContext("watch " + res.describe());
  if (head->status < 200 || head->status >= 300) {
    // Error bodies are small; drain them for the Status.
    std::string body;
    std::vector<char> buf(64 * 1024);
    while (body.size() < (1 << 20)) {
      auto n = (*conn)->readBody(buf.data(), buf.size(), config_.requestTimeout);
      if (!n || *n == 0) break;
      body.append(buf.data(), *n);
    }
    return errorFromStatus(head->status, parseStatusJson(body), head->retryAfter)
        .withContext("watch " + res.describe());
  }
  return std::make_unique<WatchStream>(std::move(*conn), head->contentType, opts.idleTimeout);
}

}  // namespace tally::runtime
