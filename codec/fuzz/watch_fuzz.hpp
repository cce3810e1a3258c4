#pragma once
// What the two watch fuzz targets (state_json_watch_fuzzer.cpp,
// state_protobuf_watch_fuzzer.cpp) do alike: feed a watch stream in pieces to
// a decoder as Informer::pumpWith does, and handle each decoded object as the
// informer's store does.

#include <cstddef>
#include <string_view>

#include "tally/runtime/watch_event.hpp"

namespace tally::fuzz {

// What the informer's store does with each decoded object: keys it and keeps
// its identity.
template <class C>
void store(const typename C::Object& object) {
  const auto stored = C::stored(object);
  if (C::key(object).empty() && !object.name.empty()) __builtin_trap();
  if (C::resourceVersion(stored) != C::resourceVersion(object)) __builtin_trap();
}

// A refusal names its reason (the informer logs it and restarts the watch).
template <class R>
void refusedWithReason(const R& result) {
  if (!result && result.error().message.empty()) __builtin_trap();
}

// `data` fed to a fresh Decoder (of codec C) `piece` bytes at a time, then finished.
template <class Decoder, class C>
void feedStream(std::string_view data, std::size_t piece) {
  Decoder decoder;
  auto sink = [](runtime::WatchEvent<typename C::Object>&& ev) {
    if (ev.object) store<C>(*ev.object);
  };
  for (std::size_t off = 0; off < data.size(); off += piece) {
    auto fed = decoder.feed(data.substr(off, piece), sink);
    refusedWithReason(fed);
    if (!fed) return;  // the informer restarts the watch
  }
  refusedWithReason(decoder.finish(sink));
}

// The watch decoders' pieces: 1 to 2332 bytes, from the input's first byte.
inline std::size_t pieceOf(unsigned char first) { return 1 + first % 64 * 37; }

}  // namespace tally::fuzz
