#include "tally/controller/catalog_endpoint.hpp"

#include <openssl/evp.h>

#include <vector>

#include "tally/codec/catalog_json.hpp"
#include "tally/codec/status_body.hpp"
#include "tally/common/log.hpp"
#include "tally/model/catalog.hpp"
#include "tally/runtime/access_review.hpp"

namespace tally::controller {
namespace {

using runtime::http::Response;

Response errorResponse(int status, std::string_view reason, const std::string& message) {
  return Response{
      status, codec::encodeStatusBody({status, std::string(reason), message}) + "\n", "application/json", {}};
}

std::string digest(std::string_view token, std::string_view ns) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, token.data(), token.size());
  EVP_DigestUpdate(ctx, "\n", 1);
  EVP_DigestUpdate(ctx, ns.data(), ns.size());
  EVP_DigestFinal_ex(ctx, out, &length);
  EVP_MD_CTX_free(ctx);
  return std::string(reinterpret_cast<const char*>(out), length);
}

constexpr std::size_t kMaxCachedDecisions = 4096;

}  // namespace

Access KubernetesAccessReviewer::review(std::string_view token, std::string_view ns) {
  Access access;
  const runtime::TokenReviewAnswer reviewed = runtime::reviewToken(*client_, token);
  if (reviewed.outcome == runtime::TokenReviewAnswer::Outcome::Failed) {
    access.message = "the token cannot be reviewed (TokenReview failed: " + reviewed.detail + ")";
    return access;
  }
  if (!reviewed.authenticated()) {
    access.verdict = Access::Verdict::Unauthenticated;
    access.message =
        "the bearer token is not valid" + (reviewed.detail.empty() ? std::string() : ": " + reviewed.detail);
    return access;
  }
  const runtime::ReviewedUser& user = reviewed.user;
  access.user = user.name;
  using Outcome = runtime::AccessAnswer::Outcome;
  runtime::AccessAttributes what{std::string(ns), rule_.verb, rule_.group, rule_.resource, "", rule_.nonResourcePath};
  if (!rule_.nonResourcePath.empty()) what.ns.clear();
  const runtime::AccessAnswer verdict = runtime::reviewSubjectAccess(*client_, user, what);
  if (verdict.outcome == Outcome::Failed) {
    access.message =
        "access of " + user.name + " cannot be reviewed (SubjectAccessReview failed: " + verdict.detail + ")";
    return access;
  }
  if (verdict.outcome == Outcome::Unreadable) {
    access.message = "the SubjectAccessReview answer for " + user.name + " cannot be read";
    return access;
  }
  if (verdict.outcome == Outcome::Allowed) {
    access.verdict = Access::Verdict::Allowed;
    return access;
  }
  access.verdict = Access::Verdict::Forbidden;
  access.message = "user " + user.name + " may not " + rule_.describe(ns) +
                   (verdict.detail.empty() ? std::string() : " (" + verdict.detail + ")");
  return access;
}

std::string AccessRule::describe(std::string_view ns) const {
  if (!nonResourcePath.empty()) return verb + " " + nonResourcePath;
  return verb + " " + resource + "." + group + " in namespace " + std::string(ns);
}

std::variant<std::string_view, Access> bearerToken(std::string_view header, const AccessRule& rule,
                                                   std::string_view ns) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || header.substr(0, kBearer.size()) != kBearer) {
    Access access;
    access.verdict = Access::Verdict::Unauthenticated;
    access.message = "present a bearer token (Authorization: Bearer TOKEN) of a user who may " + rule.describe(ns);
    return access;
  }
  return header.substr(kBearer.size());
}

Response accessErrorResponse(int status, std::string_view reason, const std::string& message) {
  return errorResponse(status, reason, message);
}

CachedAccessReviewer::CachedAccessReviewer(AccessReviewer& backend, std::chrono::milliseconds ttl, Clock clock)
    : backend_(backend), ttl_(ttl), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

Access CachedAccessReviewer::review(std::string_view token, std::string_view ns) {
  const std::string key = digest(token, ns);
  const auto now = clock_();
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.expires > now) return it->second.access;
    ++backendCalls_;
  }
  Access access = backend_.review(token, ns);
  if (access.verdict == Access::Verdict::Unknown || ttl_.count() <= 0) return access;
  std::lock_guard lock(mu_);
  if (entries_.size() >= kMaxCachedDecisions) {
    std::erase_if(entries_, [&](const auto& e) { return e.second.expires <= now; });
    if (entries_.size() >= kMaxCachedDecisions) entries_.clear();
  }
  entries_[key] = Entry{access, now + ttl_};
  return access;
}

std::uint64_t CachedAccessReviewer::backendCalls() const {
  std::lock_guard lock(mu_);
  return backendCalls_;
}

Response optionsResponse(const state::Snapshot& snapshot, std::string_view ns) {
  if (ns.empty()) return errorResponse(400, "BadRequest", "give the tenant namespace: /options?namespace=NS");
  if (!snapshot.ready()) {
    return errorResponse(503, "ServiceUnavailable",
                         "the catalogue of " + std::string(ns) + " cannot be answered: " + snapshot.unsyncedCaches() +
                             " (this replica is still starting)");
  }
  const model::CatalogOptions catalog = model::catalogOptions(snapshot.cluster(), snapshot.usage, ns);
  return Response{200, codec::encodeCatalog(catalog) + "\n", "application/json", {}};
}

Response answerOptions(const SnapshotCell<state::Snapshot>& cell, AccessReviewer& reviewer, std::string_view nsText,
                       std::string_view header) {
  const std::string ns(nsText);
  if (ns.empty()) return errorResponse(400, "BadRequest", "give the tenant namespace: /options?namespace=NS");
  auto token = bearerToken(header, AccessRule{}, ns);
  if (auto* refused = std::get_if<Access>(&token)) return errorResponse(401, "Unauthorized", refused->message);
  Access access = reviewer.review(std::get<std::string_view>(token), ns);
  switch (access.verdict) {
    case Access::Verdict::Unauthenticated: return errorResponse(401, "Unauthorized", access.message);
    case Access::Verdict::Forbidden: return errorResponse(403, "Forbidden", access.message);
    case Access::Verdict::Unknown: return errorResponse(503, "ServiceUnavailable", access.message);
    case Access::Verdict::Allowed: break;
  }
  auto snapshot = cell.read();
  return optionsResponse(*snapshot, ns);
}

observability::Family<observability::Counter>& catalogRequestMetric(observability::Registry& registry) {
  return registry.counter("tally_controller_catalog_requests_total",
                          "GET /options answers by HTTP status (200, 400, 401, 403, 503).", {"code"});
}

runtime::http::Handler catalogEndpoint(const SnapshotCell<state::Snapshot>& cell, AccessReviewer& reviewer,
                                       CatalogEndpointOptions options) {
  return [&cell, &reviewer, options = std::move(options)](runtime::http::Request& request,
                                                          runtime::http::Respond respond) {
    // The request is valid only until the handler responds: keep what is read.
    std::string ns(request.query("namespace").value_or(""));
    std::string authorization(request.header("Authorization").value_or(""));
    auto work = [&cell, &reviewer, options, ns = std::move(ns), authorization = std::move(authorization),
                 respond = std::move(respond)]() mutable {
      Response response;
      try {
        response = answerOptions(cell, reviewer, ns, authorization);
      } catch (const std::exception& e) {
        logError("catalogue request failed", {{"error", e.what()}});
        response = errorResponse(500, "InternalError", "the catalogue could not be answered");
      }
      if (options.requests) options.requests->with({std::to_string(response.status)}).inc();
      respond(std::move(response));
    };
    if (options.run) {
      options.run(std::move(work));
    } else {
      work();
    }
  };
}

}  // namespace tally::controller
