// libFuzzer target for the extender's request parsers: the first byte picks
// the verb, the rest is the body. Whatever parses is decided against a small
// snapshot and encoded, so the verbs see every shape the parser lets through.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fixtures.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/extender/wire.hpp"

using namespace tally::extender;

namespace {
const CacheWriter& writer() {
  static std::unique_ptr<CacheWriter> w = testing::loadedWriter(testing::syntheticCluster(4, 8, 2));
  return *w;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto snap = writer().snapshots().read();
  switch (data[0] % 4) {
    case 0: {
      auto args = wire::parseExtenderArgs(body);
      if (args.ok()) (void)wire::encode(filterNodes(*snap, args.value));
      break;
    }
    case 1: {
      auto args = wire::parseExtenderArgs(body);
      if (args.ok()) (void)wire::encode(prioritizeNodes(*snap, args.value, tally::model::ScoreStrategy::BinPack));
      break;
    }
    case 2: {
      auto args = wire::parsePreemptionArgs(body);
      if (args.ok()) (void)wire::encode(preemptVictims(*snap, args.value));
      break;
    }
    default: {
      auto args = wire::parseBindingArgs(body);
      if (!args.ok()) (void)wire::encodeError(args.errors.front().message);
    }
  }
  return 0;
}
