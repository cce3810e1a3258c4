#pragma once
// Entry from bytes to decoders: parses one JSON value held in a string and
// hands it to a decoder, so callers never deal with simdjson's padding or its
// special document-root values.

#include <functional>
#include <optional>
#include <string_view>

#include <simdjson.h>

#include "tally/codec/result.hpp"

namespace tally::codec {

// Calls f(value) on the single JSON value in `text`. Anything after the value
// (a second value, a stray bracket) is an error; errors name `field`.
Status withJsonValue(std::string_view text, std::string_view field,
                     const std::function<Status(simdjson::ondemand::value)>& f);

// Decodes one object with a codec (NodeCodec, PodCodec, ...) from JSON text.
template <class Codec>
Result<typename Codec::Object> decodeText(std::string_view json) {
  std::optional<typename Codec::Object> object;
  Status status = withJsonValue(json, "", [&](simdjson::ondemand::value value) -> Status {
    auto decoded = Codec::fromJson(value);
    if (!decoded) return std::move(decoded).error();
    object.emplace(std::move(decoded).value());
    return {};
  });
  if (!status) return std::move(status).error();
  return std::move(*object);
}

}  // namespace tally::codec
