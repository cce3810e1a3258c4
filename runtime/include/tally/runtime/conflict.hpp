#pragma once
// Optimistic concurrency: read the object, let the caller decide a change,
// write it pinned to the resourceVersion that was read; on 409 read again and
// decide again, a bounded number of times.
//
// The change is a JSON Patch (RFC 6902). The helper prepends a replace of
// metadata.resourceVersion, which the API server treats as a precondition,
// so a stale decision fails with 409 instead of overwriting a newer object.
// Fields the codec does not decode are left untouched on the server.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/runtime/client.hpp"
#include "tally/runtime/json_watch.hpp"

namespace tally::runtime {

class JsonPatch {
 public:
  // `jsonValue` is raw JSON text (use jsonString() for strings).
  JsonPatch& add(std::string_view path, std::string_view jsonValue) { return op("add", path, jsonValue); }
  JsonPatch& replace(std::string_view path, std::string_view jsonValue) { return op("replace", path, jsonValue); }
  JsonPatch& test(std::string_view path, std::string_view jsonValue) { return op("test", path, jsonValue); }
  JsonPatch& remove(std::string_view path) {
    ops_.push_back(R"({"op":"remove","path":)" + jsonString(path) + "}");
    return *this;
  }
  bool empty() const { return ops_.empty(); }
  std::string body(std::string_view pinnedResourceVersion = {}) const {
    std::string out = "[";
    if (!pinnedResourceVersion.empty()) {
      out += R"({"op":"replace","path":"/metadata/resourceVersion","value":)" + jsonString(pinnedResourceVersion) + "}";
    }
    for (const auto& o : ops_) {
      if (out.size() > 1) out += ",";
      out += o;
    }
    return out + "]";
  }
  // Escapes a map key for a JSON Pointer ("a/b" -> "a~1b").
  static std::string pointerToken(std::string_view key) {
    std::string out;
    for (char c : key) {
      if (c == '~')
        out += "~0";
      else if (c == '/')
        out += "~1";
      else
        out.push_back(c);
    }
    return out;
  }

 private:
  JsonPatch& op(const char* name, std::string_view path, std::string_view value) {
    ops_.push_back(std::string(R"({"op":")") + name + R"(","path":)" + jsonString(path) + R"(,"value":)" +
                   std::string(value) + "}");
    return *this;
  }
  std::vector<std::string> ops_;
};

struct ConflictStats {
  int attempts = 0;
  int conflicts = 0;
};

// mutate(const Object&) -> Result<std::optional<JsonPatch>>; nullopt means
// "already as desired" and returns the current object unchanged.
template <JsonCodec C, class Mutate>
Result<typename C::Object> updateWithRetry(Client& client, const Resource& res, std::string_view name, Mutate&& mutate,
                                           int maxAttempts = 8, ConflictStats* stats = nullptr,
                                           std::string_view subresource = {}) {
  ConflictStats local;
  ConflictStats& s = stats ? *stats : local;
  for (;;) {
    ++s.attempts;
    auto body = client.get(res, name);
    if (!body) return std::move(body).error();
    auto current = decodeJsonObject<C>(*body);
    if (!current) return std::move(current).error();
    Result<std::optional<JsonPatch>> change = mutate(static_cast<const typename C::Object&>(*current));
    if (!change) return std::move(change).error();
    if (!change->has_value()) return std::move(*current);
    PatchOptions po;
    po.subresource = std::string(subresource);
    auto updated = client.patch(res, name, PatchType::kJsonPatch, (*change)->body(C::resourceVersion(*current)), po);
    if (updated) return decodeJsonObject<C>(*updated);
    if (!updated.error().is(ErrorCode::kConflict)) return std::move(updated).error();
    ++s.conflicts;
    if (s.attempts >= maxAttempts) {
      return std::move(updated).error().withContext("gave up after " + std::to_string(s.attempts) + " attempts");
    }
  }
}

}  // namespace tally::runtime
