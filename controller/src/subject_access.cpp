#include "subject_access.hpp"

#include <simdjson.h>

#include "tally/common/json.hpp"

namespace tally::controller::detail {
namespace {

namespace od = simdjson::ondemand;

std::string requestBody(const Subject& who, const ResourceAccess& what) {
  std::string sar =
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":)" + jsonString(who.user);
  if (!who.uid.empty()) sar += R"(,"uid":)" + jsonString(who.uid);
  sar += R"(,"groups":[)";
  for (std::size_t i = 0; i < who.groups.size(); ++i) sar += (i ? "," : "") + jsonString(who.groups[i]);
  sar += R"(],"extra":)" + (who.extraJson.empty() ? std::string("{}") : who.extraJson);
  if (!what.nonResourcePath.empty()) {
    return sar + R"(,"nonResourceAttributes":{"path":)" + jsonString(what.nonResourcePath) + R"(,"verb":)" +
           jsonString(what.verb) + "}}}";
  }
  sar += R"(,"resourceAttributes":{)";
  if (!what.ns.empty()) sar += R"("namespace":)" + jsonString(what.ns) + ",";
  if (!what.name.empty()) sar += R"("name":)" + jsonString(what.name) + ",";
  sar += R"("verb":)" + jsonString(what.verb) + R"(,"group":)" + jsonString(what.group) + R"(,"resource":)" +
         jsonString(what.resource) + "}}}";
  return sar;
}

}  // namespace

AccessAnswer reviewSubjectAccess(runtime::Client& client, const Subject& who, const ResourceAccess& what) {
  AccessAnswer answer;
  auto decided = client.create(runtime::Resource::of("authorization.k8s.io", "v1", "subjectaccessreviews"),
                               requestBody(who, what));
  if (!decided) {
    answer.detail = decided.error().describe();
    return answer;
  }
  simdjson::padded_string json(*decided);
  od::parser parser;
  od::document doc;
  od::object root, status;
  if (parser.iterate(json).get(doc) || doc.get_object().get(root) ||
      root.find_field_unordered("status").get_object().get(status)) {
    answer.outcome = AccessAnswer::Outcome::Unreadable;
    return answer;
  }
  bool allowed = false;
  if (status.find_field_unordered("allowed").get_bool().get(allowed) != simdjson::SUCCESS) allowed = false;
  answer.outcome = allowed ? AccessAnswer::Outcome::Allowed : AccessAnswer::Outcome::Denied;
  std::string_view reason;
  if (!allowed && status.reset().error() == simdjson::SUCCESS &&
      status.find_field_unordered("reason").get_string().get(reason) == simdjson::SUCCESS) {
    answer.detail = std::string(reason);
  }
  return answer;
}

}  // namespace tally::controller::detail
