#include "tally/controller/class_webhook.hpp"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>

#include "refusals.hpp"
#include "tally/controller/pool_auditor.hpp"

namespace tally::controller {

using detail::forbidden;
using detail::invalid;
using runtime::admission::AdmissionRequest;
using runtime::admission::AdmissionResponse;
using runtime::admission::Operation;

runtime::Result<std::vector<Acknowledgement>> decodeAcknowledgements(std::string_view objectJson) {
  auto bad = [](std::string what) { return runtime::Error(runtime::ErrorCode::kDecode, std::move(what)); };
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(objectJson.data(), objectJson.size()).get(doc)) return bad("the object is not JSON");
  std::vector<Acknowledgement> out;
  simdjson::dom::element list;
  if (doc["spec"]["gateAcknowledgements"].get(list)) return out;
  if (list.is_null()) return out;
  simdjson::dom::array items;
  if (list.get(items)) return bad("spec.gateAcknowledgements is not a list");
  std::size_t index = 0;
  for (auto item : items) {
    if (!item.is_object()) return bad(fmt::format("spec.gateAcknowledgements[{}] is not an object", index));
    Acknowledgement a;
    for (auto [field, target] :
         {std::pair{"failureId", &a.failureId}, std::pair{"role", &a.role}, std::pair{"identity", &a.identity},
          std::pair{"at", &a.at}, std::pair{"note", &a.note}}) {
      simdjson::dom::element e;
      if (item[field].get(e)) continue;
      std::string_view v;
      if (e.get(v)) return bad(fmt::format("spec.gateAcknowledgements[{}].{} is not a string", index, field));
      *target = std::string(v);
    }
    out.push_back(std::move(a));
    ++index;
  }
  return out;
}

AdmissionResponse reviewDeviceClass(const AdmissionRequest& request) {
  if (request.operation != Operation::kUpdate || !request.subResource.empty()) return AdmissionResponse::allow();
  const std::string name = request.name;
  auto before = decodeAcknowledgements(std::string_view(request.oldObject.data(), request.oldObject.size()));
  auto after = decodeAcknowledgements(std::string_view(request.object.data(), request.object.size()));
  if (!before) return invalid("GPUDeviceClass " + name + " (before the update): " + before.error().message);
  if (!after) return invalid("GPUDeviceClass " + name + ": " + after.error().message);
  auto status = decodePoolStatus(std::string_view(request.oldObject.data(), request.oldObject.size()));
  if (!status) return invalid("GPUDeviceClass " + name + " (before the update): " + status.error().message);
  const std::string& current = status->gateFailureId;
  const std::string& user = request.userInfo.username;
  for (const Acknowledgement& a : *after) {
    const bool unchanged = std::find(before->begin(), before->end(), a) != before->end();
    if (unchanged) continue;
    const std::string what = fmt::format("acknowledgement of failure {} as {} by {}", a.failureId, a.role, a.identity);
    if (a.identity != user) {
      return forbidden(
          fmt::format("[AckIdentityMismatch] GPUDeviceClass {}: {} is refused: an identity "
                      "acknowledges only for itself, and this request is made by {}",
                      name, what, user.empty() ? "an unnamed user" : user));
    }
    if (current.empty()) {
      return forbidden(
          fmt::format("[AckNoFailure] GPUDeviceClass {}: {} is refused: the pool has no audit failure "
                      "to acknowledge (status.gateFailureId is empty)",
                      name, what));
    }
    if (a.failureId != current) {
      return forbidden(
          fmt::format("[AckWrongFailure] GPUDeviceClass {}: {} is refused: the pool's current failure "
                      "is {} (status.gateFailureId)",
                      name, what, current));
    }
    for (const Acknowledgement& other : *after) {
      if (other.failureId == a.failureId && other.identity == a.identity && other.role != a.role) {
        return forbidden(
            fmt::format("[AckTwice] GPUDeviceClass {}: {} is refused: {} acknowledged failure {} as {} "
                        "already; product and sre must be two different people",
                        name, what, a.identity, a.failureId, other.role));
      }
    }
  }
  return AdmissionResponse::allow();
}

runtime::admission::WebhookHandler classWebhook() {
  return [](const AdmissionRequest& request) { return reviewDeviceClass(request); };
}

}  // namespace tally::controller
