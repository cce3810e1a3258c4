#pragma once
// metadata of any object, read by the tree's one ObjectMeta decoder
// (tally/common/object_meta_decode.hpp): the identity fields every kind needs,
// with hooks for the labels and annotations a kind turns into model fields,
// and owner references and the creation time for the kinds that keep them.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "json_reader.hpp"
#include "tally/codec/objects.hpp"
#include "tally/common/object_meta_decode.hpp"

namespace tally::codec::detail {

struct Metadata : ObjectMeta {
  ObjectMeta* sink = nullptr;  // the caller's copy (identity only), filled once metadata is read

  // "Pod ns/name", "Node name", or the kind alone when no name was read.
  std::string describe(std::string_view kind) const;
  // Copies the identity and finalizers (not labels, annotations or owners) to the sink.
  void fillSink() const;
};

// Hook errors name the field inside the label or annotation value ("" for the
// value itself); the reader places them under metadata.annotations[key].
struct MetadataHooks {
  std::function<Status(std::string_view key, std::string_view value)> label;
  std::function<Status(std::string_view key, std::string_view value)> annotation;
  bool owners = false;      // keep metadata.ownerReferences in Metadata::ownerReferences
  bool created = false;     // parse metadata.creationTimestamp into Metadata::created
  bool finalizers = false;  // keep metadata.finalizers (copied to the sink too)

  // The parts of the metadata these hooks need decoded.
  unsigned parts() const {
    return (label ? kMetaLabels : 0u) | (annotation ? kMetaAnnotations : 0u) | (owners ? kMetaOwners : 0u) |
           (created ? kMetaCreated : 0u) | (finalizers ? kMetaFinalizers : 0u);
  }
};

Status readMetadata(od::value value, Metadata& meta, const MetadataHooks& hooks = {});

// A pod's owner references as the model keeps them (no apiVersion).
std::vector<model::OwnerReference> modelOwners(std::vector<OwnerRef>&& owners);

// The common decoder's error as the codec's: the same field path and message.
DecodeError metaError(const MetaError& error);

// Wraps an error with the object it occurred in.
DecodeError inObject(DecodeError error, std::string_view kind, const Metadata& meta);

// How every object's decode ends: its error wrapped with the object, or a
// refusal when it had no metadata.name.
Status finished(Status status, std::string_view kind, const Metadata& meta);

}  // namespace tally::codec::detail
