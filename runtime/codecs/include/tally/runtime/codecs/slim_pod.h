#pragma once
// A slim Pod for the runtime's own tests and benchmarks: the scheduling
// relevant fields only. Products write their own codecs into their own types.

#include <simdjson.h>

#include <string>
#include <vector>

#include "tally/runtime/object_meta.h"

namespace tally::runtime::codecs {

struct SlimContainer {
  std::string name;
  StringPairs requests;  // resource name -> quantity string
  StringPairs limits;
  std::string restartPolicy;  // init containers: "Always" marks a sidecar
  bool operator==(const SlimContainer&) const = default;
};

struct SlimPod {
  ObjectMeta metadata;  // name, namespace, uid, resourceVersion, owners, labels
  std::string nodeName;
  std::string schedulerName;
  std::string phase;
  std::vector<SlimContainer> containers;
  std::vector<SlimContainer> initContainers;
  StringPairs overhead;
  bool operator==(const SlimPod&) const = default;
};

struct SlimPodCodec {
  using Object = SlimPod;
  static Result<Object> fromJson(simdjson::ondemand::value v);
  static Result<Object> fromProtobuf(std::string_view raw);
  static std::string key(const Object& o) { return o.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.metadata.resourceVersion; }
};

// Parts of the metadata the slim pod keeps (annotations are dropped).
inline constexpr unsigned kSlimPodMeta = kMetaLabels | kMetaOwners;

}  // namespace tally::runtime::codecs
