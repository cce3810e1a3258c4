#include "tally/runtime/access_review.hpp"

#include <simdjson.h>

#include "tally/common/json.hpp"
#include "tally/runtime/json_watch.hpp"  // detail::documentConsumed

namespace tally::runtime {
namespace {

namespace od = simdjson::ondemand;

// The object at `key` of `parent`, or an error.
simdjson::error_code objectAt(od::object& parent, std::string_view key, od::object& out) {
  return parent.find_field_unordered(key).get_object().get(out);
}

// The status object of a review's answer; false when the answer has none.
bool statusOf(od::parser& parser, const simdjson::padded_string& json, od::document& doc, od::object& status) {
  od::object root;
  return !(parser.iterate(json).get(doc) || doc.get_object().get(root) || objectAt(root, "status", status));
}

std::string stringAt(od::object& object, std::string_view key) {
  std::string_view v;
  if (object.reset().error() || object.find_field_unordered(key).get_string().get(v)) return {};
  return std::string(v);
}

}  // namespace

std::string tokenReviewBody(std::string_view token) {
  JsonWriter json;
  json.beginObject()
      .field("apiVersion", "authentication.k8s.io/v1")
      .field("kind", "TokenReview")
      .key("spec")
      .beginObject()
      .field("token", token)
      .endObject()
      .endObject();
  return json.str();
}

TokenReviewAnswer decodeTokenReview(std::string_view body) {
  TokenReviewAnswer answer;
  simdjson::padded_string json(body);
  od::parser parser;
  od::document doc;
  od::object status, user;
  if (!statusOf(parser, json, doc, status)) {
    answer.outcome = TokenReviewAnswer::Outcome::Unreadable;
    answer.detail = "the TokenReview answer cannot be read";
    return answer;
  }
  bool authenticated = false;
  if (status.find_field_unordered("authenticated").get_bool().get(authenticated)) authenticated = false;
  if (!authenticated) {
    answer.outcome = TokenReviewAnswer::Outcome::Unauthenticated;
    answer.detail = stringAt(status, "error");
    return answer;
  }
  answer.outcome = TokenReviewAnswer::Outcome::Unreadable;
  if (status.reset().error() || objectAt(status, "user", user)) {
    answer.detail = "the TokenReview names no user";
    return answer;
  }
  answer.user.name = stringAt(user, "username");
  answer.user.uid = stringAt(user, "uid");
  od::array groups;
  if (user.reset().error() == simdjson::SUCCESS && user.find_field_unordered("groups").get_array().get(groups) == 0) {
    for (auto g : groups) {
      std::string_view s;
      if (g.get_string().get(s) == simdjson::SUCCESS) answer.user.groups.emplace_back(s);
    }
  }
  od::object extra;
  std::string_view raw;
  if (user.reset().error() == simdjson::SUCCESS && objectAt(user, "extra", extra) == simdjson::SUCCESS &&
      extra.raw_json().get(raw) == simdjson::SUCCESS) {
    answer.user.extraJson = std::string(raw);
  }
  if (answer.user.name.empty()) {
    answer.detail = "the TokenReview names no user";
    return answer;
  }
  answer.outcome = TokenReviewAnswer::Outcome::Authenticated;
  return answer;
}

namespace {

// The user's extra (map[string][]string in the API) read back, so the
// review asks for exactly that user; an extra that is not one is refused.
Result<std::vector<std::pair<std::string, std::vector<std::string>>>> readExtra(std::string_view extraJson) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  if (extraJson.empty()) return out;
  auto refused = [] { return Error(ErrorCode::kDecode, "the user's extra is not a map of string lists"); };
  simdjson::padded_string json(extraJson);
  od::parser parser;
  od::document doc;
  od::object extra;
  if (parser.iterate(json).get(doc) || doc.get_object().get(extra)) return refused();
  for (auto field : extra) {
    std::string_view key;
    od::array values;
    if (field.unescaped_key().get(key) || field.value().get_array().get(values)) return refused();
    auto& entry = out.emplace_back(std::string(key), std::vector<std::string>{});
    for (auto v : values) {
      std::string_view s;
      if (v.get_string().get(s)) return refused();
      entry.second.emplace_back(s);
    }
  }
  if (!detail::documentConsumed(doc)) return refused();
  return out;
}

}  // namespace

Result<std::string> subjectAccessReviewBody(const ReviewedUser& who, const AccessAttributes& what) {
  auto extra = readExtra(who.extraJson);
  if (!extra) return std::move(extra).error();
  JsonWriter json;
  json.beginObject()
      .field("apiVersion", "authorization.k8s.io/v1")
      .field("kind", "SubjectAccessReview")
      .key("spec")
      .beginObject()
      .field("user", std::string_view(who.name));
  if (!who.uid.empty()) json.field("uid", std::string_view(who.uid));
  json.key("groups").beginArray();
  for (const auto& g : who.groups) json.value(std::string_view(g));
  json.endArray();
  json.key("extra").beginObject();
  for (const auto& [key, values] : *extra) {
    json.key(key).beginArray();
    for (const auto& v : values) json.value(std::string_view(v));
    json.endArray();
  }
  json.endObject();
  if (!what.nonResourcePath.empty()) {
    json.key("nonResourceAttributes")
        .beginObject()
        .field("path", std::string_view(what.nonResourcePath))
        .field("verb", std::string_view(what.verb))
        .endObject();
  } else {
    json.key("resourceAttributes").beginObject();
    if (!what.ns.empty()) json.field("namespace", std::string_view(what.ns));
    if (!what.name.empty()) json.field("name", std::string_view(what.name));
    json.field("verb", std::string_view(what.verb))
        .field("group", std::string_view(what.group))
        .field("resource", std::string_view(what.resource))
        .endObject();
  }
  json.endObject().endObject();
  return json.str();
}

AccessAnswer decodeSubjectAccessReview(std::string_view body) {
  AccessAnswer answer;
  simdjson::padded_string json(body);
  od::parser parser;
  od::document doc;
  od::object status;
  if (!statusOf(parser, json, doc, status)) {
    answer.outcome = AccessAnswer::Outcome::Unreadable;
    return answer;
  }
  bool allowed = false;
  if (status.find_field_unordered("allowed").get_bool().get(allowed)) allowed = false;
  answer.outcome = allowed ? AccessAnswer::Outcome::Allowed : AccessAnswer::Outcome::Denied;
  if (!allowed) answer.detail = stringAt(status, "reason");
  return answer;
}

TokenReviewAnswer reviewToken(Client& client, std::string_view token) {
  auto reviewed = client.create(Resource::of("authentication.k8s.io", "v1", "tokenreviews"), tokenReviewBody(token));
  if (!reviewed) {
    TokenReviewAnswer answer;
    answer.outcome = TokenReviewAnswer::Outcome::Failed;
    answer.detail = reviewed.error().describe();
    return answer;
  }
  return decodeTokenReview(*reviewed);
}

AccessAnswer reviewSubjectAccess(Client& client, const ReviewedUser& who, const AccessAttributes& what) {
  auto body = subjectAccessReviewBody(who, what);
  if (!body) return {AccessAnswer::Outcome::Failed, body.error().describe()};
  auto decided = client.create(Resource::of("authorization.k8s.io", "v1", "subjectaccessreviews"), *body);
  if (!decided) return {AccessAnswer::Outcome::Failed, decided.error().describe()};
  return decodeSubjectAccessReview(*decided);
}

}  // namespace tally::runtime
