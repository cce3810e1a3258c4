#pragma once
// Optimistic concurrency, the one frame every pinned write of Tally runs in:
// read the object, decide on what was read, write pinned to the
// resourceVersion that was read; on 409 read again and decide again, a
// bounded number of rounds.
//
// The decision writes (a JSON Patch whose body() prepends the resourceVersion
// precondition, an update carrying it, a delete with a uid precondition) and
// says what comes next: finish with an outcome, decide again on a fresh read
// (its write changed the object and the next step needs the new version), or
// decide again on the object its write answered (no GET). A decision that
// returns a 409 Conflict error met a newer object: it is counted and decided
// again on a fresh read. Every other error ends the frame with that error.

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "tally/runtime/client.hpp"
#include "tally/runtime/json_patch.hpp"
#include "tally/runtime/json_watch.hpp"

namespace tally::runtime {

struct ConflictStats {
  int attempts = 0;   // rounds: reads decided on
  int conflicts = 0;  // of them, ended by a 409
};

// What one decision says comes next.
template <class T>
class Pinned {
 public:
  static Pinned finish(T outcome) { return Pinned(Finish{std::move(outcome)}); }
  static Pinned readAgain() { return Pinned(ReadAgain{}); }
  static Pinned decideOn(std::string written) { return Pinned(DecideOn{std::move(written)}); }

 private:
  template <class, JsonCodec, class>
  friend struct PinnedFrame;
  struct Finish {
    T outcome;
  };
  struct ReadAgain {};
  struct DecideOn {
    std::string body;
  };
  explicit Pinned(std::variant<Finish, ReadAgain, DecideOn> next) : next_(std::move(next)) {}
  std::variant<Finish, ReadAgain, DecideOn> next_;
};

struct PinnedWriteOptions {
  int maxAttempts = 8;                // rounds before the frame gives up with kConflict
  std::function<void()> onConflict;   // each 409 decided again (a metric)
  std::function<void()> beforeRound;  // each round, before its read (tests pause here)
  ConflictStats* stats = nullptr;
  std::stop_token stop;  // requested: the frame ends with kCancelled before its next read
};

template <class T, JsonCodec C, class Decide>
struct PinnedFrame {
  Client& client;
  const Resource& resource;
  std::string_view name;
  const PinnedWriteOptions& options;
  Decide& decide;

  Result<T> run() {
    ConflictStats local;
    ConflictStats& stats = options.stats ? *options.stats : local;
    std::optional<std::string> answered;  // the object a write answered with, read instead of a GET
    const std::string what = resource.resource + " " +
                             (resource.namespace_.empty() ? std::string() : resource.namespace_ + "/") +
                             std::string(name);
    while (stats.attempts < options.maxAttempts) {
      if (options.stop.stop_requested()) return Error{ErrorCode::kCancelled, what + ": stopped"};
      ++stats.attempts;
      if (options.beforeRound) options.beforeRound();
      Result<std::string> body = answered ? Result<std::string>(std::move(*answered)) : client.get(resource, name);
      answered.reset();
      if (!body) return std::move(body).error().withContext("get " + what);
      auto read = decodeJsonObject<C>(*body);
      if (!read) return std::move(read).error().withContext(what);
      Result<Pinned<T>> next = decide(read.value());
      if (!next) {
        if (!next.error().is(ErrorCode::kConflict)) return std::move(next).error();
        ++stats.conflicts;
        if (options.onConflict) options.onConflict();
        continue;
      }
      if (auto* done = std::get_if<typename Pinned<T>::Finish>(&next->next_)) return std::move(done->outcome);
      if (auto* on = std::get_if<typename Pinned<T>::DecideOn>(&next->next_)) answered = std::move(on->body);
    }
    return Error{ErrorCode::kConflict,
                 what + ": still conflicting after " + std::to_string(options.maxAttempts) + " attempts"};
  }
};

// decide(C::Object&) -> Result<Pinned<T>>. The get's errors come back as they
// are (kNotFound: the object is gone), a requested stop as kCancelled, and
// rounds run out as kConflict.
template <class T, JsonCodec C, class Decide>
Result<T> pinnedWrite(Client& client, const Resource& resource, std::string_view name, Decide&& decide,
                      const PinnedWriteOptions& options = {}) {
  return PinnedFrame<T, C, std::remove_reference_t<Decide>>{client, resource, name, options, decide}.run();
}

// The common case as one call: mutate(const Object&) ->
// Result<std::optional<JsonPatch>>; nullopt means "already as desired" and
// returns the current object unchanged, else the object as patched.
template <JsonCodec C, class Mutate>
Result<typename C::Object> updateWithRetry(Client& client, const Resource& res, std::string_view name, Mutate&& mutate,
                                           int maxAttempts = 8, ConflictStats* stats = nullptr,
                                           std::string_view subresource = {}) {
  using Object = typename C::Object;
  PinnedWriteOptions options;
  options.maxAttempts = maxAttempts;
  options.stats = stats;
  return pinnedWrite<Object, C>(
      client, res, name,
      [&](Object& current) -> Result<Pinned<Object>> {
        Result<std::optional<JsonPatch>> change = mutate(static_cast<const Object&>(current));
        if (!change) return std::move(change).error();
        if (!change->has_value()) return Pinned<Object>::finish(std::move(current));
        PatchOptions po;
        po.subresource = std::string(subresource);
        auto updated = client.patch(res, name, PatchType::kJsonPatch, (*change)->body(C::resourceVersion(current)), po);
        if (!updated) return std::move(updated).error();
        auto decoded = decodeJsonObject<C>(*updated);
        if (!decoded) return std::move(decoded).error();
        return Pinned<Object>::finish(std::move(decoded).value());
      },
      options);
}

}  // namespace tally::runtime
