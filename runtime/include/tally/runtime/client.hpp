#pragma once
// A Kubernetes API client on Boost.Beast: HTTP/1.1 over TLS with keep-alive
// connection reuse, typed errors and retries only where a retry is safe.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/config.hpp"
#include "tally/runtime/resource.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime {

namespace detail {
class Connection;
struct TlsContext;
}  // namespace detail

inline constexpr std::string_view kContentJson = "application/json";
inline constexpr std::string_view kContentProtobuf = "application/vnd.kubernetes.protobuf";
// Protobuf first, JSON as the fallback for types without protobuf (CRDs).
inline constexpr std::string_view kAcceptProtobufOrJson = "application/vnd.kubernetes.protobuf, application/json";

enum class Wire { kJson, kProtobuf };

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // path and query, without the config's basePath
  std::string body;
  std::string contentType;
  std::string accept = std::string(kContentJson);
  // Safe to resend after a network failure (the server ignores duplicates or
  // a precondition rejects them).
  bool idempotent = true;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string contentType;
};

struct RetryPolicy {
  int maxAttempts = 5;
  std::chrono::milliseconds initialBackoff{200};
  std::chrono::milliseconds maxBackoff{10'000};
};

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
  int64_t limit = 0;
  std::string continueToken;
  std::string resourceVersion;
  std::string resourceVersionMatch;
};

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;
  bool allowBookmarks = true;
  bool sendInitialEvents = false;                  // watch-list: needs resourceVersionMatch=NotOlderThan
  int timeoutSeconds = 0;                          // server-side end of the watch; 0 = server default
  std::chrono::milliseconds idleTimeout{120'000};  // no bytes for this long: reconnect
};

enum class PatchType { kMerge, kJsonPatch, kStrategicMerge, kApply };

struct PatchOptions {
  std::string fieldManager;
  bool force = false;  // server-side apply: take ownership of conflicting fields
  std::string subresource;
  bool dryRun = false;
};

struct DeleteOptions {
  std::string preconditionUid;
  std::string preconditionResourceVersion;
  std::optional<int64_t> gracePeriodSeconds;
  std::string propagationPolicy;  // Foreground | Background | Orphan
};

struct ObjectReference {
  std::string apiVersion;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
};

struct EventRecord {
  ObjectReference involved;
  std::string type = "Normal";  // Normal | Warning
  std::string reason;
  std::string message;
  std::string reportingComponent;
  std::string reportingInstance;
};

// An open watch response; body bytes arrive in whatever pieces the network
// delivers (HTTP chunks are already removed).
class WatchStream {
 public:
  WatchStream(std::unique_ptr<detail::Connection> conn, std::string contentType, std::chrono::milliseconds idleTimeout);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Next bytes of the body; an empty view means the server ended the watch.
  Result<std::string_view> read();
  // Thread-safe: makes a blocked read() return kCancelled.
  void cancel();
  const std::string& contentType() const { return contentType_; }

 private:
  std::unique_ptr<detail::Connection> conn_;
  std::string contentType_;
  std::chrono::milliseconds idleTimeout_;
  std::vector<char> buf_;
};

class Client : public std::enable_shared_from_this<Client> {
 public:
  static Result<std::shared_ptr<Client>> create(ClusterConfig config, RetryPolicy retry = {});
  ~Client();

  const ClusterConfig& config() const { return config_; }

  // Sends one request (retrying where safe); non-2xx statuses become errors.
  Result<HttpResponse> send(const HttpRequest& request);

  Result<std::string> get(const Resource& res, std::string_view name, std::string_view subresource = {});
  Result<HttpResponse> getAs(const Resource& res, std::string_view name, Wire wire);
  // One page; follow ListMeta.continue for the next page.
  Result<HttpResponse> list(const Resource& res, const ListOptions& opts, Wire wire = Wire::kJson);
  Result<std::string> create(const Resource& res, std::string body, std::string_view subresource = {});
  // PUT; the body carries metadata.resourceVersion for optimistic concurrency.
  Result<std::string> update(const Resource& res, std::string_view name, std::string body,
                             std::string_view subresource = {});
  Result<std::string> updateStatus(const Resource& res, std::string_view name, std::string body) {
    return update(res, name, std::move(body), "status");
  }
  Result<std::string> patch(const Resource& res, std::string_view name, PatchType type, std::string body,
                            const PatchOptions& opts = {});
  Result<std::string> remove(const Resource& res, std::string_view name, const DeleteOptions& opts = {});
  Status bindPod(std::string_view ns, std::string_view pod, std::string_view podUid, std::string_view node);
  Status createEvent(const EventRecord& event);

  Result<std::unique_ptr<WatchStream>> watch(const Resource& res, const WatchOptions& opts, Wire wire = Wire::kJson);

  // Counters for tests and metrics.
  // Connections opened: those whose TLS handshake resumed an earlier session,
  // and those that shook hands in full.
  uint64_t connectionsOpened() const { return tlsResumptions() + tlsFullHandshakes(); }
  uint64_t tlsResumptions() const { return tlsResumptions_.load(); }
  uint64_t tlsFullHandshakes() const { return tlsFullHandshakes_.load(); }
  uint64_t retries() const { return retries_.load(); }

 private:
  Client(ClusterConfig config, RetryPolicy retry);
  Result<std::unique_ptr<detail::Connection>> acquire(bool fresh);
  void release(std::unique_ptr<detail::Connection> conn);
  Result<HttpResponse> sendOnce(const HttpRequest& request, bool* retryable, bool* sent);
  std::string target(const std::string& pathAndQuery) const { return config_.basePath + pathAndQuery; }

  ClusterConfig config_;
  RetryPolicy retry_;
  std::unique_ptr<detail::TlsContext> tls_;
  std::mutex poolMu_;
  std::vector<std::unique_ptr<detail::Connection>> idle_;
  std::atomic<uint64_t> tlsResumptions_{0};
  std::atomic<uint64_t> tlsFullHandshakes_{0};
  std::atomic<uint64_t> retries_{0};
};

}  // namespace tally::runtime
