#pragma once
// coordination.k8s.io/v1 Lease, decoded from JSON or protobuf.

#include <simdjson.h>

#include <cstdint>
#include <string>

#include "tally/runtime/object_meta.hpp"
#include "tally/runtime/resource.hpp"

namespace tally::runtime {

struct Lease {
  ObjectMeta metadata;
  std::string holderIdentity;
  int32_t leaseDurationSeconds = 0;
  int32_t leaseTransitions = 0;
  std::string acquireTime;  // RFC 3339 with microseconds
  std::string renewTime;
  bool operator==(const Lease&) const = default;
};

struct LeaseCodec {
  using Object = Lease;
  static Result<Object> fromJson(simdjson::ondemand::value v);
  static Result<Object> fromProtobuf(std::string_view raw);
  static std::string key(const Object& o) { return o.metadata.key(); }
  static std::string_view resourceVersion(const Object& o) { return o.metadata.resourceVersion; }
};

inline Resource leaseResource(std::string ns) {
  return Resource::of("coordination.k8s.io", "v1", "leases", std::move(ns));
}

// metav1.MicroTime text form, e.g. 2026-11-30T01:02:03.123456Z.
std::string formatMicroTime(std::chrono::system_clock::time_point t);

}  // namespace tally::runtime
