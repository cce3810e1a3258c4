#pragma once
// The protobuf decoders of codec/protobuf.hpp, written once over the wire
// reader they walk with (a proto::WireReader): protobuf.cpp instantiates them
// on the product's proto::Reader, codec/coded/ on libprotobuf's
// proto::CodedReader, so the two readers run the same decoding code.

#include <functional>
#include <optional>
#include <string>

#include "kind_rules.hpp"
#include "metadata.hpp"
#include "tally/codec/protobuf.hpp"
#include "tally/common/object_meta_protobuf.hpp"
#include "tally/common/proto_wire.hpp"
#include "tally/common/quantity.hpp"

namespace tally::codec {
namespace protobuf_decoders {

using namespace detail;

// What a field handler returns: nothing to go on, or the error that ends the
// decode. Kept apart from Status on purpose: an empty optional costs a flag,
// while an ok Status still builds (and destroys) a DecodeError, and the walk
// asks its handler once per field.
using Failure = std::optional<DecodeError>;
using StringHook = std::function<Failure(std::string_view, std::string_view)>;

inline Failure failure(Status status) {
  if (status) return std::nullopt;
  return std::move(status).error();
}
inline Status status(Failure failed) {
  if (failed) return std::move(*failed);
  return {};
}

// A field's path, spelled out only when an error names it: decoding builds no
// strings on the success path.
struct Path {
  const Path* parent = nullptr;
  std::string_view name;
  std::size_t index = std::string_view::npos;  // set: "[index]" after the parent
  std::string str() const {
    std::string base = parent ? parent->str() : std::string();
    if (index != std::string_view::npos) return base + indexField(index);
    return joinField(base, name);
  }
};

// A malformed message ends the walk; say where.
inline DecodeError malformed(const Path& field) { return fieldError(field.str(), "malformed protobuf"); }

struct MetaHooks {
  StringHook label;
  StringHook annotation;
  bool owners = false;  // keep ownerReferences in Metadata::ownerReferences
};

// ObjectMeta is read by the tree's one decoder (decodeObjectMetaProtobuf);
// the hooks then see the labels and annotations it kept.
const Path kMetadata{nullptr, "metadata"};
const Path kLabels{&kMetadata, "labels"};
const Path kAnnotations{&kMetadata, "annotations"};
const Path kSpec{nullptr, "spec"};
const Path kStatus{nullptr, "status"};
const Path kObject{};

inline Failure runHook(const StringHook& hook, const StringPairs& pairs, const Path& field) {
  for (const auto& [key, value] : pairs) {
    if (Failure failed = hook(key, value)) return std::move(*failed).under(joinField(field.str(), keyField(key)));
  }
  return std::nullopt;
}

const Path kContainers{&kSpec, "containers"};
const Path kInitContainers{&kSpec, "initContainers"};
const Path kOverhead{&kSpec, "overhead"};

inline Failure nothing(std::string_view) { return std::nullopt; }

template <proto::WireReader Reader>
struct Decoders {
  // Walks a message: f(reader) for every field; an error of f stands, a broken
  // encoding becomes a decode error naming `field`.
  template <class F>
  static Failure walk(std::string_view message, const Path& field, F&& f) {
    Reader r(message);
    while (r.next()) {
      if (Failure failed = f(r)) [[unlikely]]
        return failed;
    }
    if (r.failed()) [[unlikely]]
      return malformed(field);
    return std::nullopt;
  }

  static std::string_view asText(const Reader& r) { return r.isBytes() ? r.bytes() : std::string_view(); }

  // map<string, string> entry: key = 1, value = 2.
  static Failure mapEntry(std::string_view entry, const Path& field, std::string_view& key, std::string_view& value) {
    return walk(entry, field, [&](Reader& e) -> Failure {
      if (e.field() == 1) key = asText(e);
      if (e.field() == 2) value = asText(e);
      return std::nullopt;
    });
  }

  // map<string, Quantity> entry, kept when `keep` accepts the key; Quantity's
  // string is field 1. The same whole-number rules as the JSON decoders.
  static Failure quantityEntry(std::string_view entry, const Path& field, bool (*keep)(std::string_view),
                               model::ResourceList& out) {
    std::string_view name, quantity;
    if (Failure read = mapEntry(entry, field, name, quantity)) return read;
    if (!keep(name)) return std::nullopt;
    std::string_view text;
    Failure read = walk(quantity, field, [&](Reader& q) -> Failure {
      if (q.field() == 1) text = asText(q);
      return std::nullopt;
    });
    if (read) return read;
    auto parsed = parseWholeQuantity(text);
    if (!parsed) return fieldError(joinField(field.str(), keyField(name)), describeQuantityError(text, parsed.error()));
    std::int64_t units = *parsed;
    if (units < 0)
      return fieldError(joinField(field.str(), keyField(name)), "negative amount " + std::to_string(units));
    out.set(name, units);
    return std::nullopt;
  }

  static Failure resourceEntry(std::string_view entry, const Path& field, model::ResourceList& out) {
    return quantityEntry(entry, field, model::isExtendedResourceName, out);
  }

  static Failure readMeta(std::string_view message, Metadata& meta, const MetaHooks& hooks) {
    const unsigned parts = (hooks.label ? kMetaLabels : 0u) | (hooks.annotation ? kMetaAnnotations : 0u) |
                           (hooks.owners ? kMetaOwners : 0u);
    MetaStatus read = decodeObjectMetaProtobufOn<Reader>(message, meta, parts);
    meta.fillSink();
    if (!read) return metaError(read.error());
    if (hooks.label) {
      if (Failure failed = runHook(hooks.label, meta.labels, kLabels)) return failed;
    }
    if (hooks.annotation) {
      if (Failure failed = runHook(hooks.annotation, meta.annotations, kAnnotations)) return failed;
    }
    return std::nullopt;
  }

  // ResourceRequirements: limits 1, requests 2.
  static Failure readResources(std::string_view message, const Path& field, model::ResourceList& requests) {
    model::ResourceList limits;
    const Path limitsPath{&field, "limits"}, requestsPath{&field, "requests"};
    Failure failed = walk(message, field, [&](Reader& r) -> Failure {
      if (r.field() == 1 && r.isBytes()) return resourceEntry(r.bytes(), limitsPath, limits);
      if (r.field() == 2 && r.isBytes()) return resourceEntry(r.bytes(), requestsPath, requests);
      return std::nullopt;
    });
    if (failed) return failed;
    defaultRequestsToLimits(requests, limits);
    return std::nullopt;
  }

  // Container: resources 8, restartPolicy 24. Everything else (image, command,
  // env, ports, probes, mounts) is skipped by its length, unread.
  static Failure readContainer(std::string_view message, const Path& field, model::ResourceList& requests,
                               std::string_view* restartPolicy) {
    const Path resources{&field, "resources"};
    return walk(message, field, [&](Reader& r) -> Failure {
      if (r.field() == 8 && r.isBytes()) return readResources(r.bytes(), resources, requests);
      if (r.field() == 24 && restartPolicy) *restartPolicy = asText(r);
      return std::nullopt;
    });
  }

  // PodSpec: containers 2, nodeName 10, schedulerName 19, initContainers 20,
  // overhead 32, resourceClaims 39.

  static Failure readPodSpec(std::string_view message, model::Pod& pod) {
    return walk(message, kSpec, [&](Reader& r) -> Failure {
      switch (r.field()) {
        case 2: {
          if (!r.isBytes()) break;
          const Path field{&kContainers, {}, pod.containers.size()};
          return readContainer(r.bytes(), field, pod.containers.emplace_back(), nullptr);
        }
        case 10: pod.nodeName = asText(r); break;
        case 19: pod.schedulerName = asText(r); break;
        case 20: {
          if (!r.isBytes()) break;
          const Path field{&kInitContainers, {}, pod.initContainers.size()};
          model::InitContainer& init = pod.initContainers.emplace_back();
          std::string_view restartPolicy;
          if (Failure read = readContainer(r.bytes(), field, init.requests, &restartPolicy)) return read;
          init.restartable = restartPolicy == "Always";
          break;
        }
        case 32:
          if (r.isBytes()) return resourceEntry(r.bytes(), kOverhead, pod.overhead);
          break;
        case 39: {
          // PodResourceClaim: name 1, resourceClaimName 3, resourceClaimTemplateName 4.
          pod.hasResourceClaims = true;
          if (!r.isBytes()) break;
          model::PodClaim& claim = pod.claims.emplace_back();
          static const Path claims{&kSpec, "resourceClaims"};
          return walk(r.bytes(), claims, [&](Reader& c) -> Failure {
            if (c.field() == 1) claim.name = asText(c);
            if (c.field() == 3) claim.claimName = asText(c);
            if (c.field() == 4) claim.templateName = asText(c);
            return std::nullopt;
          });
        }
        default: break;
      }
      return std::nullopt;
    });
  }

  // NodeCondition: type 1, status 2.
  static Failure readNodeCondition(std::string_view message, model::Node& node) {
    std::string_view type, conditionStatus;
    static const Path conditions{&kStatus, "conditions"};
    Failure failed = walk(message, conditions, [&](Reader& r) -> Failure {
      if (r.field() == 1) type = asText(r);
      if (r.field() == 2) conditionStatus = asText(r);
      return std::nullopt;
    });
    if (failed) return failed;
    if (type == "Ready") node.ready = conditionStatus == "True";
    return std::nullopt;
  }

  // An object message: metadata 1, spec 2, status 3.
  template <class Spec, class Stat>
  static Status readObject(std::string_view message, Metadata& meta, const MetaHooks& hooks, Spec&& spec, Stat&& stat) {
    return status(walk(message, kObject, [&](Reader& r) -> Failure {
      if (!r.isBytes()) return std::nullopt;
      if (r.field() == 1) return readMeta(r.bytes(), meta, hooks);
      if (r.field() == 2) return spec(r.bytes());
      if (r.field() == 3) return stat(r.bytes());
      return std::nullopt;
    }));
  }

  static Status decodePod(std::string_view message, model::Pod& pod, ObjectMeta* out) {
    std::vector<std::pair<std::string, std::string>> generated;
    Metadata meta;
    meta.sink = out;
    MetaHooks hooks;
    hooks.owners = true;
    Status read = readObject(
        message, meta, hooks, [&](std::string_view spec) { return readPodSpec(spec, pod); },
        [&](std::string_view podStatus) {
          // PodStatus: phase 1, resourceClaimStatuses 15 (PodResourceClaimStatus:
          // name 1, resourceClaimName 2).
          return walk(podStatus, kStatus, [&](Reader& r) -> Failure {
            if (r.field() == 1) pod.phase = model::parsePodPhase(asText(r));
            if (r.field() == 15 && r.isBytes()) {
              auto& entry = generated.emplace_back();
              static const Path statuses{&kStatus, "resourceClaimStatuses"};
              return walk(r.bytes(), statuses, [&](Reader& c) -> Failure {
                if (c.field() == 1) entry.first = std::string(asText(c));
                if (c.field() == 2) entry.second = std::string(asText(c));
                return std::nullopt;
              });
            }
            return std::nullopt;
          });
        });
    if (auto done = finished(std::move(read), "Pod", meta); !done) return done;
    resolveTemplateClaims(pod, generated);
    pod.owners = modelOwners(std::move(meta.ownerReferences));
    pod.ns = std::move(meta.ns);
    pod.name = std::move(meta.name);
    pod.uid = std::move(meta.uid);
    return {};
  }

  static Status decodeNode(std::string_view message, model::Node& node, ObjectMeta* out) {
    Metadata meta;
    meta.sink = out;
    MetaHooks hooks;
    hooks.label = [&](std::string_view key, std::string_view value) -> Failure {
      applyNodeLabel(node, key, value);
      return std::nullopt;
    };
    hooks.annotation = [&](std::string_view key, std::string_view value) {
      return failure(applyNodeAnnotation(node, key, value));
    };
    Status read = readObject(
        message, meta, hooks,
        [&](std::string_view spec) {
          // NodeSpec: unschedulable 4.
          return walk(spec, kSpec, [&](Reader& r) -> Failure {
            if (r.field() == 4) node.unschedulable = r.isVarint() && r.varintValue() != 0;
            return std::nullopt;
          });
        },
        [&](std::string_view nodeStatus) {
          // NodeStatus: capacity 1, allocatable 2, conditions 4.
          static const Path capacity{&kStatus, "capacity"}, allocatable{&kStatus, "allocatable"};
          return walk(nodeStatus, kStatus, [&](Reader& r) -> Failure {
            if (!r.isBytes()) return std::nullopt;
            if (r.field() == 1) return resourceEntry(r.bytes(), capacity, node.capacity);
            if (r.field() == 2) return resourceEntry(r.bytes(), allocatable, node.allocatable);
            if (r.field() == 4) return readNodeCondition(r.bytes(), node);
            return std::nullopt;
          });
        });
    node.name = meta.name;
    return finished(std::move(read), "Node", meta);
  }

  static Status decodeNamespace(std::string_view message, model::Namespace& ns, ObjectMeta* out) {
    Metadata meta;
    meta.sink = out;
    MetaHooks hooks;
    hooks.label = [&](std::string_view key, std::string_view value) {
      return failure(applyNamespaceLabel(ns, key, value));
    };
    Status read = readObject(message, meta, hooks, nothing, nothing);
    if (auto done = finished(std::move(read), "Namespace", meta); !done) return done;
    ns.name = std::move(meta.name);
    ns.deleting = meta.deleting;
    return {};
  }

  static Status decodeResourceQuota(std::string_view message, model::ResourceQuota& quota, ObjectMeta* out) {
    Metadata meta;
    meta.sink = out;
    // Quota keys ("requests.nvidia.com/gpu") rather than resource names.
    auto quotaKeys = [](std::string_view entry, const Path& field, model::ResourceList& list) {
      return quantityEntry(entry, field, model::isGpuQuotaKey, list);
    };
    Status read = readObject(
        message, meta, MetaHooks{},
        [&](std::string_view spec) {
          // ResourceQuotaSpec: hard 1.
          static const Path hard{&kSpec, "hard"};
          return walk(spec, kSpec, [&](Reader& r) -> Failure {
            if (r.field() == 1 && r.isBytes()) return quotaKeys(r.bytes(), hard, quota.hard);
            return std::nullopt;
          });
        },
        [&](std::string_view quotaStatus) {
          // ResourceQuotaStatus: hard 1, used 2.
          static const Path used{&kStatus, "used"};
          return walk(quotaStatus, kStatus, [&](Reader& r) -> Failure {
            if (r.field() == 2 && r.isBytes()) return quotaKeys(r.bytes(), used, quota.used);
            return std::nullopt;
          });
        });
    if (auto done = finished(std::move(read), "ResourceQuota", meta); !done) return done;
    quota.ns = std::move(meta.ns);
    quota.name = std::move(meta.name);
    return {};
  }
};

}  // namespace protobuf_decoders

template <proto::WireReader Reader>
Status decodeNodeProtobufOn(std::string_view message, model::Node& out, ObjectMeta* meta) {
  return protobuf_decoders::Decoders<Reader>::decodeNode(message, out, meta);
}
template <proto::WireReader Reader>
Status decodePodProtobufOn(std::string_view message, model::Pod& out, ObjectMeta* meta) {
  return protobuf_decoders::Decoders<Reader>::decodePod(message, out, meta);
}
template <proto::WireReader Reader>
Status decodeNamespaceProtobufOn(std::string_view message, model::Namespace& out, ObjectMeta* meta) {
  return protobuf_decoders::Decoders<Reader>::decodeNamespace(message, out, meta);
}
template <proto::WireReader Reader>
Status decodeResourceQuotaProtobufOn(std::string_view message, model::ResourceQuota& out, ObjectMeta* meta) {
  return protobuf_decoders::Decoders<Reader>::decodeResourceQuota(message, out, meta);
}

// Explicit instantiation for one reader, in the one file that compiles it.
#define TALLY_CODEC_PROTOBUF_DECODERS_ON(Reader)                                                       \
  template Status decodeNodeProtobufOn<Reader>(std::string_view, model::Node&, ObjectMeta*);           \
  template Status decodePodProtobufOn<Reader>(std::string_view, model::Pod&, ObjectMeta*);             \
  template Status decodeNamespaceProtobufOn<Reader>(std::string_view, model::Namespace&, ObjectMeta*); \
  template Status decodeResourceQuotaProtobufOn<Reader>(std::string_view, model::ResourceQuota&, ObjectMeta*);

}  // namespace tally::codec
