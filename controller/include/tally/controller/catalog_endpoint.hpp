#pragma once
// GET /options?namespace=NS on the webhook server: the catalogue a tenant can
// order from in NS right now (model::catalogOptions on this replica's
// snapshot, the same checks as the GPUDevice webhook). A caller presents a
// bearer token; the controller verifies it with a TokenReview and asks with a
// SubjectAccessReview whether that user may create gpudevices.gpu.tally.dev in
// NS: 401 for a missing or invalid token, 403 for a user who may not, 503
// naming the caches while this replica has not synced. Decisions are cached
// for a few seconds by a digest of the token and the namespace.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>

#include "tally/common/snapshot_cell.hpp"
#include "tally/observability/metrics.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::controller {

inline constexpr std::string_view kOptionsPath = "/options";

// Whether the holder of a token may order GPUs in a namespace.
struct Access {
  enum class Verdict { Allowed, Unauthenticated, Forbidden, Unknown };
  Verdict verdict = Verdict::Unknown;
  std::string user;     // the authenticated user, when known
  std::string message;  // why not, for the caller
};

class AccessReviewer {
 public:
  virtual ~AccessReviewer() = default;
  virtual Access review(std::string_view token, std::string_view ns) = 0;
};

// TokenReview + SubjectAccessReview against the API server. Unknown when
// either review cannot be made (the caller gets 503: nothing is allowed on a
// review that did not happen).
// What the caller must be allowed. The default, GET /options's: create
// gpudevices.gpu.tally.dev in the namespace asked about; with
// nonResourcePath, that verb on that non-resource URL (RBAC nonResourceURLs),
// whatever the namespace.
struct AccessRule {
  std::string verb = "create", group = "gpu.tally.dev", resource = "gpudevices";
  std::string nonResourcePath;
  std::string describe(std::string_view ns) const;  // "create gpudevices.gpu.tally.dev in namespace NS"
};

class KubernetesAccessReviewer final : public AccessReviewer {
 public:
  explicit KubernetesAccessReviewer(std::shared_ptr<runtime::Client> client, AccessRule rule = {})
      : client_(std::move(client)), rule_(std::move(rule)) {}
  Access review(std::string_view token, std::string_view ns) override;

 private:
  std::shared_ptr<runtime::Client> client_;
  AccessRule rule_;
};

// The bearer token of an Authorization header, or why there is none usable
// (an Access with verdict Unauthenticated and a message naming `rule`).
std::variant<std::string_view, Access> bearerToken(std::string_view authorization, const AccessRule& rule,
                                                   std::string_view ns);

// An error answer in the JSON shape of the API server's Status-like errors:
// {"code":..,"reason":..,"message":..}.
runtime::http::Response accessErrorResponse(int status, std::string_view reason, const std::string& message);

// Remembers decisions (not Unknown ones) of `backend` for `ttl`, keyed by a
// SHA-256 of token and namespace (tokens are never kept).
class CachedAccessReviewer final : public AccessReviewer {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  CachedAccessReviewer(AccessReviewer& backend, std::chrono::milliseconds ttl, Clock clock = {});
  Access review(std::string_view token, std::string_view ns) override;
  std::uint64_t backendCalls() const;

 private:
  AccessReviewer& backend_;
  std::chrono::milliseconds ttl_;
  Clock clock_;
  mutable std::mutex mu_;
  struct Entry {
    Access access;
    std::chrono::steady_clock::time_point expires;
  };
  std::map<std::string, Entry> entries_;
  std::uint64_t backendCalls_ = 0;
};

// The answer for an authorized caller, decided on `snapshot` alone: 400
// without a namespace, 503 naming the caches not synced, else 200 with the
// catalogue as JSON (codec::encodeCatalog).
runtime::http::Response optionsResponse(const state::Snapshot& snapshot, std::string_view ns);

// The whole exchange for the query's namespace and the Authorization header:
// the bearer token's review, then optionsResponse on the newest snapshot of `cell`.
runtime::http::Response answerOptions(const SnapshotCell<state::Snapshot>& cell, AccessReviewer& reviewer,
                                      std::string_view ns, std::string_view authorization);

struct CatalogEndpointOptions {
  // Where a request's review and answer run (the reviews call the API server:
  // off the server's threads). Unset: inline.
  std::function<void(std::function<void()>)> run;
  // tally_controller_catalog_requests_total{code}. Null: not counted.
  observability::Family<observability::Counter>* requests = nullptr;
};

observability::Family<observability::Counter>& catalogRequestMetric(observability::Registry& registry);

// The route's handler.
runtime::http::Handler catalogEndpoint(const SnapshotCell<state::Snapshot>& cell, AccessReviewer& reviewer,
                                       CatalogEndpointOptions options);

}  // namespace tally::controller
