#pragma once
// Decoding errors are values that name the item (kind, namespace/name or list
// index) and the JSON field path, so a person can find the broken line.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tally::codec {

struct DecodeError {
  std::string item;     // "Pod tenant-a/launcher-x", "items[3]"
  std::string field;    // "spec.containers[0].resources.requests[nvidia.com/gpu]"
  std::string message;  // "quantity \"500m\" is not a whole number"

  // "items[3] Pod tenant-a/x: spec.containers[0]...: quantity ..."
  std::string describe() const;

  // Prefixes the field path with the enclosing field ("spec" + "nodeName").
  DecodeError&& under(std::string_view parent) &&;
  // Prefixes the item with its place ("items[3]" + "Pod a/b").
  DecodeError&& within(std::string_view place) &&;
};

// Joins a parent path and a child ("spec" + "containers[0]" -> "spec.containers[0]",
// "requests" + "[nvidia.com/gpu]" -> "requests[nvidia.com/gpu]").
std::string joinField(std::string_view parent, std::string_view child);

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}          // NOLINT(implicit)
  Result(DecodeError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const DecodeError& error() const& { assert(!ok()); return std::get<1>(v_); }
  DecodeError&& error() && { assert(!ok()); return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, DecodeError> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(DecodeError error) : error_(std::move(error)), ok_(false) {}  // NOLINT(implicit)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const DecodeError& error() const& { assert(!ok_); return error_; }
  DecodeError&& error() && { assert(!ok_); return std::move(error_); }

 private:
  DecodeError error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace tally::codec
