// Fuzz target: arbitrary bytes as a JSON watch stream, delivered in pieces
// whose size comes from the first input byte; also as a LIST body.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/runtime/json_watch.hpp"
#include "tally/runtime/lease.hpp"
#include "tally/runtime/testing/slim_pod.hpp"

using namespace tally::runtime;

template <class Codec>
static void feedAll(std::string_view data, size_t piece) {
  JsonWatchDecoder<Codec> decoder;
  size_t events = 0;
  auto sink = [&](auto&& ev) { events += ev.object.has_value() ? 1 : 0; };
  for (size_t off = 0; off < data.size(); off += piece) {
    if (!decoder.feed(data.substr(off, piece), sink)) return;  // an error ends the stream
  }
  (void)decoder.finish(sink);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + bytes[0] % 64 * 37;
  std::string_view data(reinterpret_cast<const char*>(bytes + 1), size - 1);
  feedAll<codecs::SlimPodCodec>(data, piece);
  feedAll<LeaseCodec>(data, piece);
  simdjson::ondemand::parser parser;
  (void)decodeJsonList<codecs::SlimPodCodec>(parser, data);
  (void)decodeJsonObject<MetaCodec>(data);
  return 0;
}
