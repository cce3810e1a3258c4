#pragma once
// Helpers for decoder tests: decode one object from text, or expect an error
// that names the item and the field.

#include <gtest/gtest.h>

#include <string>

#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"

namespace tally::codec::testing {

template <class Codec>
typename Codec::Object decodeOk(std::string_view json) {
  auto decoded = decodeText<Codec>(json);
  if (!decoded) {
    ADD_FAILURE() << "decode failed: " << decoded.error().describe();
    return typename Codec::Object{};
  }
  return std::move(decoded).value();
}

template <class Codec>
DecodeError decodeError(std::string_view json) {
  auto decoded = decodeText<Codec>(json);
  if (decoded) {
    ADD_FAILURE() << "decode unexpectedly succeeded";
    return DecodeError{};
  }
  return decoded.error();
}

}  // namespace tally::codec::testing
