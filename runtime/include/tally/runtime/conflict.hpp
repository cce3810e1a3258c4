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
#include "tally/runtime/json_patch.hpp"
#include "tally/runtime/json_watch.hpp"

namespace tally::runtime {

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
