#pragma once
// admission.k8s.io/v1 AdmissionReview: the request the API server sends a
// webhook, decoded with simdjson on-demand, and the response it expects back.
// The object under review (and the old one, and the options) stay raw JSON,
// padded, so a handler parses only what it needs with its own codec.

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/runtime/json_patch.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime::admission {

struct GroupVersionKind {
  std::string group;  // empty for the core group
  std::string version;
  std::string kind;
  bool operator==(const GroupVersionKind&) const = default;
};

struct GroupVersionResource {
  std::string group;
  std::string version;
  std::string resource;
  bool operator==(const GroupVersionResource&) const = default;
};

enum class Operation { kCreate, kUpdate, kDelete, kConnect };
std::string_view operationName(Operation op);  // "CREATE", "UPDATE", ...

struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  // userInfo.extra as raw JSON (an object); empty when absent. A
  // SubjectAccessReview for this user passes it on as it came.
  std::string extraJson;
};

// One AdmissionReview's request.
struct AdmissionRequest {
  std::string uid;
  GroupVersionKind kind;
  GroupVersionResource resource;
  std::string subResource;  // "status", "scale", ... or empty
  // What the client asked for, when the API server converted it (absent
  // otherwise: then kind and resource are what was requested).
  std::optional<GroupVersionKind> requestKind;
  std::optional<GroupVersionResource> requestResource;
  std::string requestSubResource;
  std::string name;  // empty on a CREATE whose name the server generates
  std::string namespace_;
  Operation operation = Operation::kCreate;
  UserInfo userInfo;
  // A dry run: the API server will persist nothing, so the handler must not
  // either (no writes, no reservations, no events): it answers as it would
  // and leaves no trace (sideEffects: NoneOnDryRun promises exactly that).
  bool dryRun = false;
  // Raw JSON, padded for simdjson; empty when absent or null (oldObject on a
  // CREATE, object on a DELETE).
  simdjson::padded_string object;
  simdjson::padded_string oldObject;
  simdjson::padded_string options;  // CreateOptions, UpdateOptions, DeleteOptions

  bool hasObject() const { return object.size() > 0; }
  bool hasOldObject() const { return oldObject.size() > 0; }
};

// A copy of `request`, its objects and options copied too (the padded JSON
// moves but does not copy): for a decision that runs after its handler returns.
AdmissionRequest copyRequest(const AdmissionRequest& request);

struct DecodeOptions {
  // Above this the review is refused unread. The API server caps an object at
  // about 3 MiB; an UPDATE carries two of them.
  std::size_t maxBodyBytes = 7 << 20;
};

// Decodes an AdmissionReview body. Errors (ErrorCode::kDecode, or kBadRequest
// for a body above the limit) name what is wrong: the field, the expected
// apiVersion or kind, JSON that is not an object.
Result<AdmissionRequest> decodeAdmissionReview(std::string_view body, const DecodeOptions& options = {});

// The patch a mutating webhook answers (tally/runtime/json_patch.hpp).
using runtime::JsonPatch;

// What a webhook answers.
struct AdmissionResponse {
  bool allowed = true;
  // For a refusal: the HTTP code (403, 422, ...) and the message the client
  // is shown; reason is a metav1.StatusReason ("Forbidden", "Invalid", ...).
  int code = 0;
  std::string message;
  std::string reason;
  JsonPatch patch;  // only on an allowed answer of a mutating webhook
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> auditAnnotations;

  static AdmissionResponse allow() { return {}; }
  static AdmissionResponse refuse(int code, std::string message, std::string reason = {});
  static AdmissionResponse mutate(JsonPatch patch);
};

// The response AdmissionReview for the request `uid`; a patch is sent as
// base64 with patchType "JSONPatch".
std::string encodeAdmissionReview(std::string_view uid, const AdmissionResponse& response);

std::string base64Encode(std::string_view bytes);

}  // namespace tally::runtime::admission
