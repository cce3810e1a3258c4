#include "tally/codec/dra_objects.hpp"

#include <string>

#include "metadata.hpp"
#include "tally/model/dra.hpp"
#include "tally/common/quantity.hpp"

namespace tally::codec {
namespace {

using namespace detail;

enum class Round { Down, Up };

// A quantity (a JSON string, or a number) in whole base units: a capacity is
// rounded down, a request or consumption up (see model/dra_objects.hpp).
Status readAmount(od::value value, std::string_view field, Round round, std::int64_t& out) {
  od::json_type type;
  if (auto code = value.type().get(type)) return jsonError(code, field, "a quantity");
  if (type == od::json_type::null) return {};
  if (type == od::json_type::number) return readCount(value, field, out);
  std::string_view text;
  if (auto code = value.get_string().get(text)) return jsonError(code, field, "a quantity");
  auto parsed = parseQuantity(text);
  if (!parsed) return fieldError(field, describeQuantityError(text, parsed.error()));
  constexpr Int128 kNano = 1'000'000'000;
  Int128 nanos = parsed->nanos();
  if (nanos < 0) return fieldError(field, "negative quantity \"" + std::string(text) + "\"");
  Int128 whole = nanos / kNano;
  if (round == Round::Up && nanos % kNano != 0) ++whole;
  if (whole > INT64_MAX) return fieldError(field, describeQuantityError(text, QuantityError::OutOfRange));
  out = static_cast<std::int64_t>(whole);
  return {};
}

// counters / capacity maps: name -> {"value": quantity, ...}.
Status readValueMap(od::value value, std::string_view field, Round round, std::map<std::string, std::int64_t>& out) {
  return forEachField(value, field, [&](std::string_view name, od::value entry) -> Status {
    std::int64_t amount = 0;
    Status status = forEachField(entry, keyField(name), [&](std::string_view key, od::value v) -> Status {
      if (key == "value") return readAmount(v, key, round, amount);
      return {};
    });
    if (!status) return status;
    out[std::string(name)] = amount;
    return {};
  });
}

// A quantity map: name -> quantity (capacity.requests, consumedCapacity).
Status readQuantityMap(od::value value, std::string_view field, std::map<std::string, std::int64_t>& out) {
  return forEachField(value, field, [&](std::string_view name, od::value amount) -> Status {
    return readAmount(amount, keyField(name), Round::Up, out[std::string(name)]);
  });
}

// attributes: name -> {"string"|"version"|"int"|"bool": value}, kept as text.
Status readAttributes(od::value value, std::string_view field, std::map<std::string, std::string>& out) {
  return forEachField(value, field, [&](std::string_view name, od::value entry) -> Status {
    std::string& text = out[std::string(name)];
    return forEachField(entry, keyField(name), [&](std::string_view kind, od::value v) -> Status {
      if (kind == "string" || kind == "version") return readString(v, kind, text);
      if (kind == "int") {
        std::int64_t number = 0;
        if (auto code = v.get_int64().get(number)) return jsonError(code, kind, "an integer");
        text = std::to_string(number);
        return {};
      }
      if (kind == "bool") {
        bool flag = false;
        if (auto status = readBool(v, kind, flag); !status) return status;
        text = flag ? "true" : "false";
      }
      return {};
    });
  });
}

Status readEffect(od::value value, std::string_view field, model::DraTaintEffect& out) {
  std::string text;
  if (auto status = readString(value, field, text); !status) return status;
  if (text == "NoSchedule")
    out = model::DraTaintEffect::NoSchedule;
  else if (text == "NoExecute")
    out = model::DraTaintEffect::NoExecute;
  else if (text == "None")
    out = model::DraTaintEffect::None;
  // An effect this version does not know is believed to keep devices away.
  else
    out = model::DraTaintEffect::NoSchedule;
  return {};
}

Status readTaint(od::value value, std::string_view field, model::DraTaint& taint) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "key") return readString(v, key, taint.key);
    if (key == "value") return readString(v, key, taint.value);
    if (key == "effect") return readEffect(v, key, taint.effect);
    return {};
  });
}

Status readDevice(od::value value, std::string_view field, model::DraDevice& device) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "name") return readString(v, key, device.name);
    if (key == "attributes") return readAttributes(v, key, device.attributes);
    if (key == "capacity") {
      std::map<std::string, std::int64_t> capacity;
      if (auto status = readValueMap(v, key, Round::Down, capacity); !status) return status;
      for (auto& [name, amount] : capacity) device.capacity[name].value = amount;
      return {};
    }
    if (key == "allowMultipleAllocations") return readBool(v, key, device.allowMultipleAllocations);
    if (key == "nodeName") return readString(v, key, device.nodeName);
    if (key == "taints") {
      return forEachElement(v, key, [&](std::size_t index, od::value t) -> Status {
        return readTaint(t, indexField(index), device.taints.emplace_back());
      });
    }
    if (key == "consumesCounters") {
      return forEachElement(v, key, [&](std::size_t index, od::value use) -> Status {
        model::DraCounterUse& out = device.consumesCounters.emplace_back();
        return forEachField(use, indexField(index), [&](std::string_view k, od::value u) -> Status {
          if (k == "counterSet") return readString(u, k, out.counterSet);
          if (k == "counters") return readValueMap(u, k, Round::Up, out.counters);
          return {};
        });
      });
    }
    return {};
  });
}

Status readPoolRef(od::value value, std::string_view field, model::ResourceSlice& slice) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "name") return readString(v, key, slice.pool);
    if (key == "generation") return readCount(v, key, slice.generation);
    if (key == "resourceSliceCount") return readCount(v, key, slice.resourceSliceCount);
    return {};
  });
}

Status readSliceSpec(od::value value, model::ResourceSlice& slice) {
  return forEachField(value, "spec", [&](std::string_view key, od::value v) -> Status {
    if (key == "driver") return readString(v, key, slice.driver);
    if (key == "nodeName") return readString(v, key, slice.nodeName);
    if (key == "perDeviceNodeSelection") return readBool(v, key, slice.perDeviceNodeSelection);
    if (key == "pool") return readPoolRef(v, key, slice);
    if (key == "devices") {
      return forEachElement(v, key, [&](std::size_t index, od::value d) -> Status {
        return readDevice(d, indexField(index), slice.devices.emplace_back());
      });
    }
    if (key == "sharedCounters") {
      return forEachElement(v, key, [&](std::size_t index, od::value set) -> Status {
        model::DraCounterSet& out = slice.sharedCounters.emplace_back();
        return forEachField(set, indexField(index), [&](std::string_view k, od::value s) -> Status {
          if (k == "name") return readString(s, k, out.name);
          if (k == "counters") return readValueMap(s, k, Round::Down, out.counters);
          return {};
        });
      });
    }
    return {};
  });
}

Status readChoice(od::value value, std::string_view field, model::DraRequestChoice& choice) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "name") return readString(v, key, choice.name);
    if (key == "deviceClassName") return readString(v, key, choice.deviceClassName);
    if (key == "count") return readCount(v, key, choice.count);
    if (key == "adminAccess") return readBool(v, key, choice.adminAccess);
    if (key == "allocationMode") {
      std::string mode;
      if (auto status = readString(v, key, mode); !status) return status;
      if (mode == "All")
        choice.mode = model::DraAllocationMode::All;
      else if (mode.empty() || mode == "ExactCount")
        choice.mode = model::DraAllocationMode::ExactCount;
      else
        return fieldError(key, "unknown allocationMode \"" + mode + "\"");
      return {};
    }
    if (key == "capacity") {
      return forEachField(v, key, [&](std::string_view k, od::value c) -> Status {
        if (k == "requests") return readQuantityMap(c, k, choice.capacity);
        return {};
      });
    }
    return {};
  });
}

Status readRequest(od::value value, std::string_view field, model::DraRequest& request) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "name") return readString(v, key, request.name);
    if (key == "exactly") {
      model::DraRequestChoice choice;
      if (auto status = readChoice(v, key, choice); !status) return status;
      choice.name.clear();
      request.choices.insert(request.choices.begin(), std::move(choice));
      return {};
    }
    if (key == "firstAvailable") {
      return forEachElement(v, key, [&](std::size_t index, od::value c) -> Status {
        return readChoice(c, indexField(index), request.choices.emplace_back());
      });
    }
    return {};
  });
}

Status readResult(od::value value, std::string_view field, model::DraResult& result) {
  return forEachField(value, field, [&](std::string_view key, od::value v) -> Status {
    if (key == "request") return readString(v, key, result.request);
    if (key == "driver") return readString(v, key, result.driver);
    if (key == "pool") return readString(v, key, result.pool);
    if (key == "device") return readString(v, key, result.device);
    if (key == "adminAccess") return readBool(v, key, result.adminAccess);
    if (key == "shareID") return readString(v, key, result.shareId);
    if (key == "consumedCapacity") return readQuantityMap(v, key, result.consumedCapacity);
    return {};
  });
}

// allocation.nodeSelector: the node of a node-local allocation is the one
// value of a matchFields metadata.name In term (how the allocator writes it).
Status readAllocatedNode(od::value value, std::string_view field, std::string& node) {
  return forEachField(value, field, [&](std::string_view key, od::value terms) -> Status {
    if (key != "nodeSelectorTerms") return {};
    return forEachElement(terms, key, [&](std::size_t index, od::value term) -> Status {
      return forEachField(term, indexField(index), [&](std::string_view k, od::value fields) -> Status {
        if (k != "matchFields") return {};
        return forEachElement(fields, k, [&](std::size_t i, od::value requirement) -> Status {
          std::string name, op;
          std::vector<std::string> values;
          Status status = forEachField(requirement, indexField(i), [&](std::string_view r, od::value x) -> Status {
            if (r == "key") return readString(x, r, name);
            if (r == "operator") return readString(x, r, op);
            if (r == "values") {
              return forEachElement(x, r, [&](std::size_t j, od::value s) -> Status {
                return readString(s, indexField(j), values.emplace_back());
              });
            }
            return {};
          });
          if (!status) return status;
          if (name == "metadata.name" && op == "In" && values.size() == 1) node = values.front();
          return {};
        });
      });
    });
  });
}

Status readClaimStatus(od::value value, model::ResourceClaim& claim) {
  return forEachField(value, "status", [&](std::string_view key, od::value v) -> Status {
    if (key == "allocation") {
      auto null = isNull(v, key);
      if (!null) return std::move(null).error();
      if (*null) return {};
      claim.allocated = true;
      return forEachField(v, key, [&](std::string_view k, od::value a) -> Status {
        if (k == "nodeSelector") return readAllocatedNode(a, k, claim.allocatedNode);
        if (k != "devices") return {};
        return forEachField(a, k, [&](std::string_view d, od::value results) -> Status {
          if (d != "results") return {};
          return forEachElement(results, d, [&](std::size_t index, od::value r) -> Status {
            return readResult(r, indexField(index), claim.results.emplace_back());
          });
        });
      });
    }
    if (key == "reservedFor") {
      return forEachElement(v, key, [&](std::size_t index, od::value r) -> Status {
        model::ClaimConsumer& consumer = claim.reservedFor.emplace_back();
        return forEachField(r, indexField(index), [&](std::string_view k, od::value x) -> Status {
          if (k == "resource") return readString(x, k, consumer.resource);
          if (k == "name") return readString(x, k, consumer.name);
          if (k == "uid") return readString(x, k, consumer.uid);
          return {};
        });
      });
    }
    return {};
  });
}

}  // namespace

Result<model::ResourceSlice> decodeResourceSlice(od::value json, ObjectMeta* out) {
  model::ResourceSlice slice;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key == "spec") return readSliceSpec(field, slice);
    return {};
  });
  if (auto done = finished(std::move(status), "ResourceSlice", meta); !done) return std::move(done).error();
  if (slice.driver.empty() || slice.pool.empty())
    return inObject(fieldError("spec", "a ResourceSlice names its driver and pool"), "ResourceSlice", meta);
  slice.name = std::move(meta.name);
  return slice;
}

namespace {

Result<model::ResourceClaim> decodeClaim(od::value json, ObjectMeta* out, bool allowGenerateName) {
  model::ResourceClaim claim;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.annotation = [&](std::string_view key, std::string_view value) -> Status {
    if (key == model::kAnnotationExtendedResourceClaim) claim.extendedResource = value == "true";
    return {};
  };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    if (key == "spec") {
      return forEachField(field, key, [&](std::string_view k, od::value devices) -> Status {
        if (k != "devices") return {};
        return forEachField(devices, k, [&](std::string_view d, od::value requests) -> Status {
          if (d != "requests") return {};
          return forEachElement(requests, d, [&](std::size_t index, od::value r) -> Status {
            return readRequest(r, indexField(index), claim.requests.emplace_back());
          });
        });
      });
    }
    if (key == "status") return readClaimStatus(field, claim);
    return {};
  });
  if (!(allowGenerateName && status && meta.name.empty())) {
    if (auto done = finished(std::move(status), "ResourceClaim", meta); !done) return std::move(done).error();
  }
  claim.ns = std::move(meta.ns);
  claim.name = std::move(meta.name);
  claim.uid = std::move(meta.uid);
  claim.deleting = meta.deleting;
  return claim;
}

}  // namespace

Result<model::ResourceClaim> decodeResourceClaim(od::value json, ObjectMeta* out) {
  return decodeClaim(json, out, false);
}

Result<model::ResourceClaim> decodeResourceClaimAtCreate(od::value json) { return decodeClaim(json, nullptr, true); }

Result<model::DeviceTaintRule> decodeDeviceTaintRule(od::value json, ObjectMeta* out) {
  model::DeviceTaintRule rule;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key != "spec") return {};
    return forEachField(field, key, [&](std::string_view k, od::value v) -> Status {
      if (k == "taint") return readTaint(v, k, rule.taint);
      if (k != "deviceSelector") return {};
      return forEachField(v, k, [&](std::string_view s, od::value x) -> Status {
        if (s == "driver") return readString(x, s, rule.driver);
        if (s == "pool") return readString(x, s, rule.pool);
        if (s == "device") return readString(x, s, rule.device);
        return {};
      });
    });
  });
  if (auto done = finished(std::move(status), "DeviceTaintRule", meta); !done) return std::move(done).error();
  rule.name = std::move(meta.name);
  return rule;
}

}  // namespace tally::codec
