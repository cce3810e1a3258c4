#pragma once
// Small readers over simdjson on-demand values that turn every simdjson error
// and every wrong type into a DecodeError naming the field. Objects are read
// by iterating their fields once, so field order never matters.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <simdjson.h>

#include "tally/codec/json_text.hpp"
#include "tally/codec/result.hpp"
#include "tally/model/resources.hpp"

namespace tally::codec::detail {

namespace od = simdjson::ondemand;

DecodeError fieldError(std::string_view field, std::string message);
DecodeError jsonError(simdjson::error_code code, std::string_view field, std::string_view expected);

// "[<key>]" for map keys that contain dots or slashes, ".<key>" otherwise.
std::string keyField(std::string_view key);
std::string indexField(std::size_t index);

// Whether the value is JSON null (consumed when it is).
Result<bool> isNull(od::value& value, std::string_view field);

// null reads as "" / false / unchanged.
Status readString(od::value value, std::string_view field, std::string& out);
Status readBool(od::value value, std::string_view field, bool& out);
// A non-negative whole amount: a JSON integer or a Kubernetes quantity string.
Status readCount(od::value value, std::string_view field, std::int64_t& out);
// A present, non-null value means the object is being deleted.
Status readPresence(od::value value, std::string_view field, bool& out);

// Calls f(key, value) for every field of an object; null is an empty object.
// f returns Status; its error is placed under this field.
template <class F>
Status forEachField(od::value value, std::string_view field, F&& f) {
  auto null = isNull(value, field);
  if (!null) return std::move(null).error();
  if (*null) return {};
  od::object object;
  if (auto code = value.get_object().get(object)) return jsonError(code, field, "an object");
  for (auto entry : object) {
    od::field member;
    if (auto code = std::move(entry).get(member)) return jsonError(code, field, "an object");
    std::string_view key;
    if (auto code = member.unescaped_key().get(key)) return jsonError(code, field, "an object");
    Status status = f(key, member.value());
    if (!status) return std::move(status).error().under(field);
  }
  return {};
}

// Calls f(index, value) for every element of an array; null is an empty array.
template <class F>
Status forEachElement(od::value value, std::string_view field, F&& f) {
  auto null = isNull(value, field);
  if (!null) return std::move(null).error();
  if (*null) return {};
  od::array array;
  if (auto code = value.get_array().get(array)) return jsonError(code, field, "an array");
  std::size_t index = 0;
  for (auto entry : array) {
    od::value element;
    if (auto code = std::move(entry).get(element))
      return jsonError(code, joinField(field, indexField(index)), "a value");
    Status status = f(index, element);
    if (!status) return std::move(status).error().under(field);
    ++index;
  }
  return {};
}

// An object of resource name -> quantity, keeping the names `keep` accepts
// (other values are skipped unread: "500m" of cpu is no GPU's business).
template <class Keep>
Status readResources(od::value value, std::string_view field, Keep&& keep, model::ResourceList& out) {
  return forEachField(value, field, [&](std::string_view name, od::value amount) -> Status {
    if (!keep(name)) return {};
    std::int64_t units = 0;
    if (auto status = readCount(amount, keyField(name), units); !status) return status;
    out.set(name, units);
    return {};
  });
}

// withJsonValue for JSON held in an annotation: errors fall under `field`.
template <class F>
Status withEmbeddedJson(std::string_view text, std::string_view field, F&& f) {
  return withJsonValue(text, field, [&](od::value value) -> Status {
    Status status = f(value);
    if (!status) return std::move(status).error().under(field);
    return {};
  });
}

}  // namespace tally::codec::detail
