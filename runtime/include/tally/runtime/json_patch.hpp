#pragma once
// RFC 6902 JSON Patch, built op by op: what a mutating webhook answers and
// what the pinned writes send. Values are raw JSON (jsonString() for a
// string); paths are JSON Pointers, made with pointer().

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace tally::runtime {

class JsonPatch {
 public:
  enum class Op { kAdd, kReplace, kRemove, kTest };
  struct Operation {
    Op op;
    std::string path;
    std::string valueJson;  // empty for kRemove
  };

  JsonPatch& add(std::string path, std::string valueJson);
  JsonPatch& replace(std::string path, std::string valueJson);
  JsonPatch& remove(std::string path);
  JsonPatch& test(std::string path, std::string valueJson);
  // The same with a string value (quoted and escaped here).
  JsonPatch& addString(std::string path, std::string_view value);
  JsonPatch& replaceString(std::string path, std::string_view value);
  JsonPatch& testString(std::string path, std::string_view value);

  // Finalizers an object carries, `current` as read: adds `finalizer` (the
  // list made when there is none); removes it at its index, tested first, so a
  // list changed since the read fails the patch (422) instead of removing
  // another finalizer. Nothing when it is already there / not there.
  JsonPatch& addFinalizer(const std::vector<std::string>& current, std::string_view finalizer);
  JsonPatch& removeFinalizer(const std::vector<std::string>& current, std::string_view finalizer);

  // "/" + each token with '~' as "~0" and '/' as "~1": pointer({"metadata",
  // "labels", "tally.dev/tenant"}) is "/metadata/labels/tally.dev~1tenant".
  static std::string pointer(std::initializer_list<std::string_view> tokens);
  static std::string escapeToken(std::string_view token);

  bool empty() const { return ops_.empty(); }
  const std::vector<Operation>& operations() const { return ops_; }
  // The patch as the API server reads it.
  std::string toJson() const;
  // The same, pinned: a replace of metadata.resourceVersion first, which the
  // API server takes as a precondition, so a write decided on an older
  // object fails with 409 instead of overwriting a newer one.
  std::string body(std::string_view pinnedResourceVersion = {}) const;

 private:
  std::vector<Operation> ops_;
};

}  // namespace tally::runtime
