#pragma once
// What yaml-cpp is given of text Tally reads from people (ledger records, the
// billing plans): checked first, on the parser's events, for the expansion an
// alias can cause. Ten anchored lists of ten aliases each are 10^10 nodes once
// loaded or emitted, from a few hundred bytes: such a file is refused, naming
// the figure and the limit, instead of holding a reconcile (or the auditor) for
// minutes.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tally::codec {

struct YamlLimits {
  std::size_t maxNodes = 100'000;  // nodes after expanding every alias
  std::size_t maxDepth = 64;       // nested sequences and mappings
};

// Why the text must not be loaded, or nothing. Malformed YAML is not its
// business: the load that follows reports it.
std::optional<std::string> yamlExpansionRefusal(std::string_view text, const YamlLimits& limits = {});

}  // namespace tally::codec
