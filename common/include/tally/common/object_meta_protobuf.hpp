#pragma once
// decodeObjectMetaProtobuf (object_meta_decode.hpp) on a wire reader of the
// caller's choice: the product decodes on proto::Reader (object_meta.cpp);
// the same code on proto::CodedReader is its check against libprotobuf.

#include <string>
#include <string_view>

#include "tally/common/object_meta.hpp"
#include "tally/common/proto_wire.hpp"

namespace tally {
namespace meta_protobuf {

inline MetaError malformed(std::string field) { return {std::move(field), "malformed protobuf"}; }

// map<string, string> entry: key 1, value 2.
template <proto::WireReader Reader>
MetaStatus protoPair(std::string_view entry, const char* field, StringPairs& out) {
  Reader r(entry);
  std::string_view key, value;
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) key = r.bytes();
    if (r.field() == 2) value = r.bytes();
  }
  if (r.failed()) return malformed(field);
  out.emplace_back(std::string(key), std::string(value));
  return {};
}

template <proto::WireReader Reader>
MetaStatus protoOwner(std::string_view message, OwnerRef& owner) {
  Reader r(message);
  while (r.next()) {
    const bool bytes = r.isBytes();
    switch (r.field()) {
      case 1:
        if (bytes) owner.kind.assign(r.bytes());
        break;
      case 3:
        if (bytes) owner.name.assign(r.bytes());
        break;
      case 4:
        if (bytes) owner.uid.assign(r.bytes());
        break;
      case 5:
        if (bytes) owner.apiVersion.assign(r.bytes());
        break;
      case 6:
        if (r.isVarint()) owner.controller = r.varintValue() != 0;
        break;
      default: break;
    }
  }
  if (r.failed()) return malformed("metadata.ownerReferences");
  return {};
}

// metav1.Time: seconds 1.
template <proto::WireReader Reader>
MetaStatus protoTime(std::string_view message, std::int64_t& seconds) {
  Reader r(message);
  while (r.next()) {
    if (r.field() == 1 && r.isVarint()) seconds = r.int64Value();
  }
  if (r.failed()) return malformed("metadata.creationTimestamp");
  return {};
}

}  // namespace meta_protobuf

template <proto::WireReader Reader>
MetaStatus decodeObjectMetaProtobufOn(std::string_view message, ObjectMeta& out, unsigned parts = kMetaAll) {
  Reader r(message);
  while (r.next()) {
    const bool bytes = r.isBytes();
    switch (r.field()) {
      case 1:
        if (bytes) out.name.assign(r.bytes());
        break;
      case 3:
        if (bytes) out.ns.assign(r.bytes());
        break;
      case 5:
        if (bytes) out.uid.assign(r.bytes());
        break;
      case 6:
        if (bytes) out.resourceVersion.assign(r.bytes());
        break;
      case 7:
        if (r.isVarint()) out.generation = r.int64Value();
        break;
      case 8:
        if (bytes && (parts & kMetaCreated)) {
          if (auto st = meta_protobuf::protoTime<Reader>(r.bytes(), out.created); !st) return st;
        }
        break;
      case 9: out.deleting = true; break;
      case 11:
        if (bytes && (parts & kMetaLabels)) {
          if (auto st = meta_protobuf::protoPair<Reader>(r.bytes(), "metadata.labels", out.labels); !st) return st;
        }
        break;
      case 12:
        if (bytes && (parts & kMetaAnnotations)) {
          if (auto st = meta_protobuf::protoPair<Reader>(r.bytes(), "metadata.annotations", out.annotations); !st)
            return st;
        }
        break;
      case 13:
        if (bytes && (parts & kMetaOwners)) {
          if (auto st = meta_protobuf::protoOwner<Reader>(r.bytes(), out.ownerReferences.emplace_back()); !st)
            return st;
        }
        break;
      case 14:
        if (bytes && (parts & kMetaFinalizers)) out.finalizers.emplace_back(r.bytes());
        break;
      default: break;
    }
  }
  if (r.failed()) return meta_protobuf::malformed("metadata");
  return {};
}

}  // namespace tally
