#pragma once
// metadata of any object: the identity fields every kind needs, with hooks for
// the labels, annotations and owner references a kind cares about.

#include <functional>
#include <string>
#include <string_view>

#include "json_reader.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec::detail {

struct Metadata {
  std::string ns;
  std::string name;
  std::string uid;
  std::string creationTimestamp;
  std::string resourceVersion;
  bool deleting = false;       // deletionTimestamp set
  ObjectMeta* sink = nullptr;  // the caller's copy, filled once metadata is read

  // "Pod ns/name", "Node name", or the kind alone when no name was read.
  std::string describe(std::string_view kind) const;
};

// Hook errors name the field inside the label or annotation value ("" for the
// value itself); the reader places them under metadata.annotations[key].
struct MetadataHooks {
  std::function<Status(std::string_view key, std::string_view value)> label;
  std::function<Status(std::string_view key, std::string_view value)> annotation;
  std::function<Status(od::value ownerReferences)> ownerReferences;
};

Status readMetadata(od::value value, Metadata& meta, const MetadataHooks& hooks = {});

// Wraps an error with the object it occurred in.
DecodeError inObject(DecodeError error, std::string_view kind, const Metadata& meta);

// How every object's decode ends: its error wrapped with the object, or a
// refusal when it had no metadata.name.
Status finished(Status status, std::string_view kind, const Metadata& meta);

}  // namespace tally::codec::detail
