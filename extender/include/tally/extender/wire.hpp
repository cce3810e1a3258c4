#pragma once
// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1).
// Those Go structs carry no json tags, so keys are Go field names, matched
// case-insensitively as Go's decoder does. The Pod inside is a v1.Pod and is
// decoded by the codec, the same decoder the informers use.

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/model/objects.hpp"

namespace tally::extender::wire {

// A request body that could not be read; `message` names the field and what
// was wrong ("ExtenderArgs.NodeNames[2]: expected a string").
struct BadRequest {
  std::string kind;  // metrics label: "json" | "schema" | "pod" | "missing"
  std::string message;
};

template <class T>
struct Parsed {
  T value{};
  std::vector<BadRequest> errors;  // empty: ok; at most one is reported
  bool ok() const { return errors.empty(); }
};

// ExtenderArgs{Pod, Nodes, NodeNames}.
struct ExtenderArgs {
  model::Pod pod;
  // NodeNames, or Nodes.items[].metadata.name: views into the request body, or
  // into `ownedNames` for the rare name written with JSON escapes.
  std::vector<std::string_view> nodeNames;
  std::deque<std::string> ownedNames;
  bool plainNames = true;  // every name needs no JSON escape (they were read as written)
  // With Nodes (nodeCacheCapable: false) the answer must carry Node objects:
  // the raw JSON of each item, pointing into the request body.
  bool fromNodeList = false;
  std::vector<std::string_view> rawNodes;
};

// ExtenderPreemptionArgs{Pod, NodeNameToVictims, NodeNameToMetaVictims}; both
// victim forms are read as pod UIDs.
struct MetaVictims {
  std::vector<std::string> podUids;
  std::int64_t numPdbViolations = 0;
};
struct PreemptionArgs {
  model::Pod pod;
  std::vector<std::pair<std::string, MetaVictims>> victims;  // by node, in request order
};

// ExtenderBindingArgs{PodName, PodNamespace, PodUID, Node}.
struct BindingArgs {
  std::string podName;
  std::string podNamespace;
  std::string podUid;
  std::string node;
};

// `body` must stay alive, unchanged, while the result's string_views are
// used; its capacity is grown (not its content) to leave simdjson's padding.
Parsed<ExtenderArgs> parseExtenderArgs(std::string& body);
Parsed<PreemptionArgs> parsePreemptionArgs(std::string& body);
Parsed<BindingArgs> parseBindingArgs(std::string& body);

// ExtenderFilterResult.
struct FilterResult {
  std::vector<std::string_view> passed;  // names (or, with rawPassed, node objects)
  bool plainNames = false;               // `passed` needs no JSON escape (ExtenderArgs::plainNames)
  bool asNodeList = false;               // answer with Nodes.items (raw objects) instead of NodeNames
  std::vector<std::string_view> rawPassed;
  std::vector<std::pair<std::string_view, std::string_view>> failed;  // node -> message
  std::vector<std::pair<std::string_view, std::string_view>> unresolvable;
  std::deque<std::string> messages;  // what the messages above point into
  std::string error;
};
std::string encode(const FilterResult& result);

// HostPriorityList.
struct HostPriority {
  std::string_view host;
  std::int64_t score = 0;
};
// Whether a host with this score is listed at all. Hosts scored 0 are left
// out: kube-scheduler adds an extender's score only to the hosts it lists, so
// an unlisted host scores 0 all the same, and on an empty cluster (where
// bin-packing scores nearly every node 0) it decodes a handful of entries
// instead of one per candidate. Every HostPriorityList encoder asks this.
constexpr bool listedScore(std::int64_t score) { return score != 0; }
// `plainHosts`: every host needs no JSON escape (ExtenderArgs::plainNames).
std::string encode(const std::vector<HostPriority>& priorities, bool plainHosts = false);

// ExtenderPreemptionResult{NodeNameToMetaVictims}.
struct PreemptionResult {
  std::vector<std::pair<std::string, MetaVictims>> victims;
};
std::string encode(const PreemptionResult& result);

// ExtenderBindingResult{Error}, and the {"Error": ...} body of a 4xx/5xx.
std::string encodeError(std::string_view error);

// Case-insensitive ASCII equality, as Go's encoding/json matches field names.
bool keyEquals(std::string_view key, std::string_view goName);

}  // namespace tally::extender::wire
