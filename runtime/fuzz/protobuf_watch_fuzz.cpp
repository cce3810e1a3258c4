// Fuzz target: arbitrary bytes as a protobuf watch stream (length-prefixed
// WatchEvent frames) in pieces, and as a protobuf LIST / GET body.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/runtime/lease.hpp"
#include "tally/runtime/protobuf_watch.hpp"
#include "tally/runtime/testing/slim_pod.hpp"

using namespace tally::runtime;

template <class Codec>
static void feedAll(std::string_view data, size_t piece) {
  ProtobufWatchDecoder<Codec> decoder;
  auto sink = [](auto&&) {};
  for (size_t off = 0; off < data.size(); off += piece) {
    if (!decoder.feed(data.substr(off, piece), sink)) return;
  }
  (void)decoder.finish(sink);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + bytes[0] % 64 * 37;
  std::string_view data(reinterpret_cast<const char*>(bytes + 1), size - 1);
  feedAll<codecs::SlimPodCodec>(data, piece);
  feedAll<LeaseCodec>(data, piece);
  (void)decodeProtobufList<codecs::SlimPodCodec>(data);
  (void)decodeProtobufObject<MetaCodec>(data);
  (void)parseStatusProtobuf(data);
  return 0;
}
