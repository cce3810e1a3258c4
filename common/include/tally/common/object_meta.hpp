#pragma once
// The one slice of metav1.ObjectMeta the whole tree keeps: identity, resource
// version, generation, deletion, and, only when a caller asks for them (see
// MetaParts), labels, annotations and owner references. It stays slim because
// informers hold one per cached object (150,000 pods): the optional parts are
// empty vectors (no allocation) unless decoded.
//
// One JSON decoder and one protobuf decoder fill it (object_meta_decode.hpp,
// library tally_object_meta, which needs simdjson; this header alone does not).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/common/expected.hpp"

namespace tally {

using StringPairs = std::vector<std::pair<std::string, std::string>>;

inline const std::string* lookup(const StringPairs& pairs, std::string_view key) {
  for (const auto& [k, v] : pairs) {
    if (k == key) return &v;
  }
  return nullptr;
}

struct OwnerRef {
  std::string apiVersion;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool operator==(const OwnerRef&) const = default;
};

struct ObjectMeta {
  std::string ns;  // empty: cluster-scoped
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::int64_t generation = 0;
  std::int64_t created = 0;               // creationTimestamp in Unix seconds, with kMetaCreated (0: absent)
  bool deleting = false;                  // deletionTimestamp is set
  StringPairs labels;                     // with kMetaLabels
  StringPairs annotations;                // with kMetaAnnotations
  std::vector<OwnerRef> ownerReferences;  // with kMetaOwners
  std::vector<std::string> finalizers;    // with kMetaFinalizers
  bool operator==(const ObjectMeta&) const = default;

  // "namespace/name", or "name" when cluster-scoped: the informers' store key.
  std::string key() const { return ns.empty() ? name : ns + "/" + name; }
  const std::string* annotation(std::string_view k) const { return lookup(annotations, k); }
  const std::string* label(std::string_view k) const { return lookup(labels, k); }
  bool hasFinalizer(std::string_view f) const {
    for (const auto& x : finalizers) {
      if (x == f) return true;
    }
    return false;
  }
};

// Which optional parts of the metadata to keep (labels and annotations can
// dominate the memory of a cache; parsing creationTimestamp costs time).
enum MetaParts : unsigned {
  kMetaCore = 0,
  kMetaLabels = 1,
  kMetaAnnotations = 2,
  kMetaOwners = 4,
  kMetaCreated = 8,
  kMetaFinalizers = 16,
  kMetaAll = 31,
};

struct MetaError {
  std::string field;    // "metadata.labels[app]", "metadata.creationTimestamp"
  std::string message;  // "expected a string", "malformed protobuf"
  std::string describe() const { return field + ": " + message; }
};
using MetaStatus = Expected<void, MetaError>;

}  // namespace tally
