// libFuzzer target: arbitrary bytes as the bodies of the extender's verbs
// (filter/prioritize ExtenderArgs, preempt ExtenderPreemptionArgs, bind
// ExtenderBindingArgs), parsed as tally-extender parses them, in place, with
// simdjson's padding. What parses is encoded again, as the verbs answer.

#include <cstddef>
#include <cstdint>
#include <string>

#include "tally/extender/wire.hpp"

using namespace tally::extender;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string input(reinterpret_cast<const char*>(bytes), size);
  {
    std::string body = input;
    body.reserve(body.size() + 64);
    auto args = wire::parseExtenderArgs(body);
    if (args.ok()) {
      wire::FilterResult result;
      result.plainNames = args.value.plainNames;
      for (auto name : args.value.nodeNames) result.passed.push_back(name);
      (void)wire::encode(result);
    } else if (args.errors.front().message.empty()) {
      __builtin_trap();  // a refusal names its reason
    }
  }
  {
    std::string body = input;
    body.reserve(body.size() + 64);
    auto args = wire::parsePreemptionArgs(body);
    if (!args.ok() && args.errors.front().message.empty()) __builtin_trap();
  }
  {
    std::string body = input;
    body.reserve(body.size() + 64);
    auto args = wire::parseBindingArgs(body);
    if (!args.ok() && args.errors.front().message.empty()) __builtin_trap();
  }
  return 0;
}
