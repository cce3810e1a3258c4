#include "tally/runtime/testing/slim_pod.hpp"

#include "tally/common/proto_wire.hpp"
#include "tally/common/quantity.hpp"
#include "tally/runtime/object_meta.hpp"

namespace tally::runtime::codecs {
namespace {

namespace od = simdjson::ondemand;

Status atomInto(od::value v, Atom& out, std::string_view what) {
  std::string_view s;
  if (auto e = v.get_string().get(s)) return jsonError(e, what);
  out = Atom(s);
  return {};
}

Status addAmount(std::string_view name, std::string_view quantity, ResourceAmounts& out) {
  auto milli = parseQuantityMilli(quantity);
  if (!milli)
    return Error(ErrorCode::kDecode,
                 "bad quantity " + std::string(quantity.substr(0, 32)) + " for " + std::string(name.substr(0, 64)));
  out.push_back(ResourceAmount{Atom(name), *milli});
  return {};
}

Status amountsJson(od::value v, ResourceAmounts& out, std::string_view what) {
  od::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, what);
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, what);
    Atom name(key);  // intern before the value is read: the key view is transient
    std::string_view q;
    if (auto e = field.value().get_string().get(q)) return jsonError(e, what);
    auto milli = parseQuantityMilli(q);
    if (!milli) return Error(ErrorCode::kDecode, std::string(what) + ": bad quantity " + std::string(q.substr(0, 32)));
    out.push_back(ResourceAmount{name, *milli});
  }
  return {};
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
      if (auto st = amountsJson(fv, c.requests, "resources.requests"); !st) return st;
    } else if (key == "limits") {
      if (auto st = amountsJson(fv, c.limits, "resources.limits"); !st) return st;
    }
  }
  return {};
}

Status containersJson(od::value v, std::vector<SlimContainer>& out) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) {
    bool isNull = false;
    if (!v.is_null().get(isNull) && isNull) return {};
    return jsonError(e, "containers");
  }
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
      if (key == "name")
        st = atomInto(fv, c.name, "container.name");
      else if (key == "resources")
        st = resourcesJson(fv, c);
      else if (key == "restartPolicy")
        st = atomInto(fv, c.restartPolicy, "container.restartPolicy");
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
    if (key == "nodeName")
      st = atomInto(fv, pod.nodeName, "spec.nodeName");
    else if (key == "schedulerName")
      st = atomInto(fv, pod.schedulerName, "spec.schedulerName");
    else if (key == "containers")
      st = containersJson(fv, pod.containers);
    else if (key == "initContainers")
      st = containersJson(fv, pod.initContainers);
    else if (key == "overhead")
      st = amountsJson(fv, pod.overhead, "spec.overhead");
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
    if (auto st = atomInto(fv, pod.phase, "status.phase"); !st) return st;
  }
  return {};
}

// map<string, Quantity> entry: key = 1, value = 2 (Quantity{string = 1}).
Status amountProto(std::string_view entry, ResourceAmounts& out) {
  proto::Reader r(entry);
  std::string_view key;
  std::string_view value;
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) key = r.bytes();
    if (r.field() == 2) {
      proto::Reader q(r.bytes());
      while (q.next()) {
        if (q.field() == 1 && q.isBytes()) value = q.bytes();
      }
      if (q.failed()) return Error(ErrorCode::kDecode, "malformed Quantity");
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed resource map entry");
  return addAmount(key, value, out);
}

Status resourcesProto(std::string_view raw, SlimContainer& c) {
  proto::Reader r(raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) {
      if (auto st = amountProto(r.bytes(), c.limits); !st) return st;
    } else if (r.field() == 2) {
      if (auto st = amountProto(r.bytes(), c.requests); !st) return st;
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
      case 1: c.name = Atom(r.bytes()); break;
      case 8:
        if (auto st = resourcesProto(r.bytes(), c); !st) return st;
        break;
      case 24: c.restartPolicy = Atom(r.bytes()); break;
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
      case 10: pod.nodeName = Atom(r.bytes()); break;
      case 19: pod.schedulerName = Atom(r.bytes()); break;
      case 32:
        if (auto st = amountProto(r.bytes(), pod.overhead); !st) return st;
        break;
      default: break;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "malformed PodSpec");
  return {};
}

constexpr unsigned kSlimPodMeta = kMetaLabels | kMetaOwners;

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
    if (key == "metadata") {
      st = fromMeta(decodeObjectMetaJson(fv, pod.metadata, kSlimPodMeta));
    } else if (key == "spec") {
      st = specJson(fv, pod);
    } else if (key == "status") {
      st = statusJson(fv, pod);
    }
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
      case 1: st = fromMeta(decodeObjectMetaProtobuf(r.bytes(), pod.metadata, kSlimPodMeta)); break;
      case 2: st = specProto(r.bytes(), pod); break;
      case 3: {
        proto::Reader s(r.bytes());
        while (s.next()) {
          if (s.field() == 1 && s.isBytes()) pod.phase = Atom(s.bytes());
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
