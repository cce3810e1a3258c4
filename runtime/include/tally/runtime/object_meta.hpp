#pragma once
// Object metadata in the runtime is the tree's one type, tally::ObjectMeta
// (tally/common/object_meta.hpp), read by its one JSON and protobuf decoder.
// What stays here is the runtime's own: the decoders' errors as the runtime's
// error type, the small JSON helpers the runtime's codecs share, and
// MetaCodec for informers that keep metadata only.

#include <simdjson.h>

#include <string>
#include <string_view>

#include "tally/common/object_meta.hpp"
#include "tally/common/object_meta_decode.hpp"
#include "tally/runtime/codec.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime {

// The common decoders' MetaError as a kDecode Error ("metadata.name: expected a string").
Error metaError(const MetaError& error);
inline Status fromMeta(MetaStatus status) {
  if (!status) return metaError(status.error());
  return {};
}

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
