// libFuzzer target for the extender's request parsers: the first byte picks
// the verb, the rest is the body. Whatever parses is decided against a small
// snapshot and encoded, so the verbs see every shape the parser lets through.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <simdjson.h>

#include "tally/extender/testing/fixtures.hpp"
#include "tally/extender/verbs.hpp"
#include "tally/extender/wire.hpp"

using namespace tally::extender;

namespace {
const CacheWriter& writer() {
  static std::unique_ptr<CacheWriter> w = testing::loadedWriter(testing::syntheticCluster(4, 8, 2));
  return *w;
}

// Oracles for what parsed as NodeNames: a DOM parse (another simdjson code
// path) reads the same names, when the body holds one NodeNames member in any
// case; and the one-pass answers equal the lists encoded.
void checkNames(const std::string& original, const wire::ExtenderArgs& args, const ExtenderSnapshot& snap) {
  if (args.fromNodeList) return;
  simdjson::dom::parser dom;
  simdjson::dom::element root;
  if (dom.parse(original).get(root)) return;  // the on-demand reader is laxer about values it skips
  simdjson::dom::object object;
  if (root.get_object().get(object)) __builtin_trap();  // it parsed as an object for us
  simdjson::dom::element names;
  int members = 0;
  for (auto field : object) {
    if (wire::keyEquals(field.key, "NodeNames")) {
      ++members;
      names = field.value;
    }
  }
  if (members != 1 || names.is_null()) return;
  simdjson::dom::array array;
  if (names.get_array().get(array)) __builtin_trap();
  std::size_t i = 0;
  for (auto element : array) {
    std::string_view name;
    if (element.is_null())
      name = "";
    else if (element.get_string().get(name))
      __builtin_trap();
    if (i >= args.nodeNames.size() || args.nodeNames[i] != name) __builtin_trap();
    ++i;
  }
  if (i != args.nodeNames.size()) __builtin_trap();
  DecisionTally a, b;
  if (filterResponse(snap, args, &a) != wire::encode(filterNodes(snap, args, &b)) || a.counts != b.counts) {
    __builtin_trap();
  }
  if (prioritizeResponse(snap, args, tally::model::ScoreStrategy::BinPack) !=
      wire::encode(prioritizeNodes(snap, args, tally::model::ScoreStrategy::BinPack), args.plainNames)) {
    __builtin_trap();
  }
  // The filter that keeps its scores answers the same, and the prioritize of
  // its cycle (the passed names) answered from them equals scoring anew.
  FilterScores keep;
  DecisionTally c;
  if (filterResponse(snap, args, &c, keep, tally::model::ScoreStrategy::Spread) != filterResponse(snap, args) ||
      c.counts != a.counts) {
    __builtin_trap();
  }
  if (!keep.kept) return;
  const wire::FilterResult passed = filterNodes(snap, args);
  wire::ExtenderArgs next;
  next.pod = args.pod;
  next.plainNames = args.plainNames;
  next.nodeNames = passed.passed;
  auto fromFilter = prioritizeFromFilter(keep, next, tally::model::ScoreStrategy::Spread);
  if (!fromFilter || *fromFilter != prioritizeResponse(snap, next, tally::model::ScoreStrategy::Spread)) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto snap = writer().snapshots().read();
  switch (data[0] % 4) {
    case 0: {
      const std::string original = body;  // parsing may write into its body
      auto args = wire::parseExtenderArgs(body);
      if (args.ok()) checkNames(original, args.value, *snap);
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
