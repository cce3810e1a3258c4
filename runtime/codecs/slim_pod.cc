#include "tally/runtime/codecs/slim_pod.h"

#include "tally/runtime/proto_wire.h"

namespace tally::runtime::codecs {
namespace {

namespace od = simdjson::ondemand;

Status quantityMapJson(od::value v, StringPairs& out, std::string_view what) {
  return jsonStringMapInto(v, out, what);
}

Status resourcesJson(od::value v, SlimContainer& c) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "resources");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "resources");
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "resources");
    if (key == "requests") {
      if (auto st = quantityMapJson(fv, c.requests, "resources.requests"); !st) return st;
    } else if (key == "limits") {
      if (auto st = quantityMapJson(fv, c.limits, "resources.limits"); !st) return st;
    }
  }
  return {};
}

Status containersJson(od::value v, std::vector<SlimContainer>& out) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) return jsonError(e, "containers");
  for (auto item : arr) {
    od::object obj;
    if (auto e = item.get_object().get(obj)) return jsonError(e, "container");
    SlimContainer c;
    for (auto field : obj) {
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return jsonError(e, "container");
      od::value fv;
      if (auto e = field.value().get(fv)) return jsonError(e, "container");
      Status st;
      if (key == "name") st = jsonStringInto(fv, c.name, "container.name");
      else if (key == "resources") st = resourcesJson(fv, c);
      else if (key == "restartPolicy") st = jsonStringInto(fv, c.restartPolicy, "container.restartPolicy");
      if (!st) return st;
    }
    out.push_back(std::move(c));
  }
  return {};
}

Status specJson(od::value v, SlimPod& pod) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "spec");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "spec");
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "spec");
    Status st;
    if (key == "nodeName") st = jsonStringInto(fv, pod.nodeName, "spec.nodeName");
    else if (key == "schedulerName") st = jsonStringInto(fv, pod.schedulerName, "spec.schedulerName");
    else if (key == "containers") st = containersJson(fv, pod.containers);
    else if (key == "initContainers") st = containersJson(fv, pod.initContainers);
    else if (key == "overhead") st = quantityMapJson(fv, pod.overhead, "spec.overhead");
    if (!st) return st;
  }
  return {};
}

Status statusJson(od::value v, SlimPod& pod) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "status");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "status");
    if (key != "phase") continue;
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "status");
    if (auto st = jsonStringInto(fv, pod.phase, "status.phase"); !st) return st;
  }
  return {};
}

Status resourcesProto(std::string_view raw, SlimContainer& c) {
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) {
      if (auto st = protoStringPairInto(r.bytes(), c.limits, true); !st) return st;
    } else if (r.field() == 2) {
      if (auto st = protoStringPairInto(r.bytes(), c.requests, true); !st) return st;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed ResourceRequirements");
  return {};
}

Status containerProto(std::string_view raw, SlimContainer& c) {
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    switch (r.field()) {
      case 1: c.name.assign(r.bytes()); break;
      case 8: if (auto st = resourcesProto(r.bytes(), c); !st) return st; break;
      case 24: c.restartPolicy.assign(r.bytes()); break;
      default: break;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed Container");
  return {};
}

Status specProto(std::string_view raw, SlimPod& pod) {
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    switch (r.field()) {
      case 2:
      case 20: {
        SlimContainer c;
        if (auto st = containerProto(r.bytes(), c); !st) return st;
        (r.field() == 2 ? pod.containers : pod.initContainers).push_back(std::move(c));
        break;
      }
      case 10: pod.nodeName.assign(r.bytes()); break;
      case 19: pod.schedulerName.assign(r.bytes()); break;
      case 32:
        if (auto st = protoStringPairInto(r.bytes(), pod.overhead, true); !st) return st;
        break;
      default: break;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed PodSpec");
  return {};
}

}  // namespace

Result<SlimPod> SlimPodCodec::fromJson(od::value v) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "pod");
  SlimPod pod;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "pod");
    od::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "pod");
    Status st;
    if (key == "metadata") st = decodeObjectMetaJson(fv, pod.metadata, kSlimPodMeta);
    else if (key == "spec") st = specJson(fv, pod);
    else if (key == "status") st = statusJson(fv, pod);
    if (!st) return std::move(st).error().withContext("pod " + pod.metadata.key());
  }
  return pod;
}

Result<SlimPod> SlimPodCodec::fromProtobuf(std::string_view raw) {
  SlimPod pod;
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    Status st;
    switch (r.field()) {
      case 1: st = decodeObjectMetaProtobuf(r.bytes(), pod.metadata, kSlimPodMeta); break;
      case 2: st = specProto(r.bytes(), pod); break;
      case 3: {
        proto::Reader s(r.bytes());
        while (s.next()) {
          if (s.field() == 1 && s.isBytes()) pod.phase.assign(s.bytes());
        }
        if (s.failed()) st = Error(ErrorCode::kDecode, "malformed PodStatus");
        break;
      }
      default: break;
    }
    if (!st) return std::move(st).error().withContext("pod " + pod.metadata.key());
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed Pod");
  return pod;
}

}  // namespace tally::runtime::codecs
