#include "tally/controller/catalog_endpoint.hpp"

#include <openssl/evp.h>
#include <simdjson.h>

#include <vector>

#include "subject_access.hpp"
#include "tally/codec/catalog_json.hpp"
#include "tally/common/json.hpp"
#include "tally/common/log.hpp"
#include "tally/model/catalog.hpp"

namespace tally::controller {
namespace {

namespace od = simdjson::ondemand;
using runtime::http::Response;

Response errorResponse(int status, std::string_view reason, const std::string& message) {
  JsonWriter json;
  json.beginObject()
      .field("code", std::int64_t{status})
      .field("reason", reason)
      .field("message", std::string_view(message))
      .endObject();
  return Response{status, json.str() + "\n", "application/json", {}};
}

// The authenticated user of a TokenReview's answer; `raw` keeps the JSON of
// groups and extra so the SubjectAccessReview asks for exactly that user.
struct User {
  bool authenticated = false;
  std::string name, uid, error;
  std::vector<std::string> groups;
  std::string extraJson;  // "{}" when none
};

std::string readString(od::object& object, std::string_view key) {
  std::string_view v;
  if (object.find_field_unordered(key).get_string().get(v) == simdjson::SUCCESS) return std::string(v);
  return {};
}

User parseTokenReview(const std::string& body) {
  User user;
  simdjson::padded_string json(body);
  od::parser parser;
  od::document doc;
  od::object root, status, u;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root) ||
      root.find_field_unordered("status").get_object().get(status)) {
    user.error = "the TokenReview answer cannot be read";
    return user;
  }
  bool authenticated = false;
  if (status.find_field_unordered("authenticated").get_bool().get(authenticated) != simdjson::SUCCESS) {
    authenticated = false;
  }
  user.authenticated = authenticated;
  if (!authenticated) {
    if (status.reset().error() == simdjson::SUCCESS) user.error = readString(status, "error");
    return user;
  }
  if (status.reset().error() || status.find_field_unordered("user").get_object().get(u)) {
    user.authenticated = false;
    user.error = "the TokenReview names no user";
    return user;
  }
  user.name = readString(u, "username");
  if (u.reset().error() == simdjson::SUCCESS) user.uid = readString(u, "uid");
  od::array groups;
  if (u.reset().error() == simdjson::SUCCESS && u.find_field_unordered("groups").get_array().get(groups) == 0) {
    for (auto g : groups) {
      std::string_view s;
      if (g.get_string().get(s) == simdjson::SUCCESS) user.groups.emplace_back(s);
    }
  }
  user.extraJson = "{}";
  od::object extra;
  if (u.reset().error() == simdjson::SUCCESS && u.find_field_unordered("extra").get_object().get(extra) == 0) {
    std::string_view raw;
    if (extra.raw_json().get(raw) == simdjson::SUCCESS) user.extraJson = std::string(raw);
  }
  return user;
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
  JsonWriter tokenReview;
  tokenReview.beginObject()
      .field("apiVersion", "authentication.k8s.io/v1")
      .field("kind", "TokenReview")
      .key("spec")
      .beginObject()
      .field("token", token)
      .endObject()
      .endObject();
  auto reviewed =
      client_->create(runtime::Resource::of("authentication.k8s.io", "v1", "tokenreviews"), tokenReview.str());
  if (!reviewed) {
    access.message = "the token cannot be reviewed (TokenReview failed: " + reviewed.error().describe() + ")";
    return access;
  }
  User user = parseTokenReview(*reviewed);
  if (!user.authenticated) {
    access.verdict = Access::Verdict::Unauthenticated;
    access.message = "the bearer token is not valid" + (user.error.empty() ? std::string() : ": " + user.error);
    return access;
  }
  access.user = user.name;
  using Outcome = detail::AccessAnswer::Outcome;
  detail::ResourceAccess what{std::string(ns), rule_.verb, rule_.group, rule_.resource, "", rule_.nonResourcePath};
  if (!rule_.nonResourcePath.empty()) what.ns.clear();
  const detail::AccessAnswer verdict =
      detail::reviewSubjectAccess(*client_, {user.name, user.uid, user.groups, user.extraJson}, what);
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
