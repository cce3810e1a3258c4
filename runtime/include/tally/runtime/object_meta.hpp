#pragma once
// The slice of metav1.ObjectMeta every controller needs, with decoders for
// the JSON and protobuf forms.

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/runtime/codec.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime {

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
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string resourceVersion;
  int64_t generation = 0;
  bool deleting = false;  // deletionTimestamp is set
  StringPairs labels;
  StringPairs annotations;
  std::vector<OwnerRef> ownerReferences;
  bool operator==(const ObjectMeta&) const = default;

  std::string key() const { return namespacedKey(namespace_, name); }
  const std::string* annotation(std::string_view k) const { return lookup(annotations, k); }
  const std::string* label(std::string_view k) const { return lookup(labels, k); }
};

// Which optional parts of the metadata to keep (labels and annotations can
// dominate the memory of a cache).
enum MetaParts : unsigned { kMetaCore = 0, kMetaLabels = 1, kMetaAnnotations = 2, kMetaOwners = 4, kMetaAll = 7 };

Status decodeObjectMetaJson(simdjson::ondemand::value v, ObjectMeta& out, unsigned parts = kMetaAll);
Status decodeObjectMetaProtobuf(std::string_view raw, ObjectMeta& out, unsigned parts = kMetaAll);

// Small JSON helpers shared by codecs.
Status jsonStringInto(simdjson::ondemand::value v, std::string& out, std::string_view what);
Status jsonStringMapInto(simdjson::ondemand::value v, StringPairs& out, std::string_view what);
// Protobuf map<string,string> / map<string,Quantity> entry.
Status protoStringPairInto(std::string_view entry, StringPairs& out, bool valueIsQuantity);

// Generic codec for any object when only metadata matters
// (PartialObjectMetadata-style informers, namespaces, bookmarks).
struct MetaObject {
  ObjectMeta metadata;
  bool operator==(const MetaObject&) const = default;
};

struct MetaCodec {
  using Object = MetaObject;
  static Result<Object> fromJson(simdjson::ondemand::value v);
  static Result<Object> fromProtobuf(std::string_view raw);
  static std::string key(const Object& o) { return o.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.metadata.resourceVersion; }
};

}  // namespace tally::runtime
