#pragma once
// A slim Pod for the runtime's own tests and benchmarks: the scheduling
// relevant fields only, laid out for a cache of 150,000 pods: repeated
// vocabulary (node and resource names, phases) is interned and quantities are
// integers; metadata is the tree's one ObjectMeta (namespaces and label keys
// are plain strings there). Products write their own codecs into their own types.

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tally/common/object_meta.hpp"
#include "tally/runtime/atom.hpp"
#include "tally/runtime/codec.hpp"

namespace tally::runtime::codecs {

struct ResourceAmount {
  Atom name;          // e.g. "nvidia.com/gpu"
  int64_t milli = 0;  // quantity in milli-units ("2" -> 2000, "16Gi" -> 16*2^30*1000)
  bool operator==(const ResourceAmount&) const = default;
};
using ResourceAmounts = std::vector<ResourceAmount>;

inline std::optional<int64_t> milliOf(const ResourceAmounts& list, std::string_view name) {
  for (const auto& r : list) {
    if (r.name == name) return r.milli;
  }
  return std::nullopt;
}

struct SlimContainer {
  Atom name;
  ResourceAmounts requests;
  ResourceAmounts limits;
  Atom restartPolicy;  // init containers: "Always" marks a sidecar
  bool operator==(const SlimContainer&) const = default;
};

struct SlimPod {
  ObjectMeta metadata;  // name, namespace, uid, resourceVersion, deletion, labels, owners
  Atom nodeName;
  Atom schedulerName;
  Atom phase;
  std::vector<SlimContainer> containers;
  std::vector<SlimContainer> initContainers;
  ResourceAmounts overhead;
  bool operator==(const SlimPod&) const = default;
};

struct SlimPodCodec {
  using Object = SlimPod;
  static Result<Object> fromJson(simdjson::ondemand::value v);
  static Result<Object> fromProtobuf(std::string_view raw);
  static std::string key(const Object& o) { return o.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.metadata.resourceVersion; }
};

}  // namespace tally::runtime::codecs
