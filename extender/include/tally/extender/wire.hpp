#pragma once
// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1).
// Those Go structs carry no json tags, so keys are Go field names, matched
// case-insensitively as Go's decoder does. The Pod inside is a v1.Pod and is
// decoded by the codec, the same decoder the informers use.

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
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

// ExtenderFilterResult as lists, for callers that look at the answer before
// it is sent; encode() writes it with FilterResultWriter.
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

namespace detail {
// Copies the n bytes of a node name (tens of bytes) in word-sized moves, the
// last one overlapping: cheaper than a call to memcpy for each of thousands.
inline void copyShort(char* d, const char* s, std::size_t n) {
  if (n < 8) {
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
    return;
  }
  for (std::size_t i = 0; i + 8 < n; i += 8) std::memcpy(d + i, s + i, 8);
  std::memcpy(d + n - 8, s + n - 8, 8);
}
// Copies `name` between quotes at `d` and returns the end: for names that need
// no escape, which is what appendJsonString writes for them.
inline char* putQuoted(char* d, std::string_view name) {
  *d++ = '"';
  copyShort(d, name.data(), name.size());
  d += name.size();
  *d++ = '"';
  return d;
}
}  // namespace detail

// The one encoder of ExtenderFilterResult: the answer is written as the nodes
// are decided, in one pass over thousands of candidates and without lists in
// between. Names that need no escape (`plainNames`, ExtenderArgs::plainNames)
// are copied between quotes in word-sized moves; a message that many nodes
// share is escaped once, by message(), and copied for each of them. Names
// and node objects are copied when handed over; nothing is kept.
class FilterResultWriter {
 public:
  using Message = std::uint32_t;

  // asNodeList: the answer carries Nodes.items, the passed nodes' raw objects.
  explicit FilterResultWriter(bool plainNames, bool asNodeList = false);
  ~FilterResultWriter();
  FilterResultWriter(const FilterResultWriter&) = delete;
  FilterResultWriter& operator=(const FilterResultWriter&) = delete;

  // Room for every one of `entries` (names or node objects) to pass.
  void reserveFor(const std::vector<std::string_view>& entries);
  // `text` escaped once, for fail() and failForGood() to copy.
  Message message(std::string_view text);
  void pass(std::string_view name) {
    if (plainNames_ && static_cast<std::size_t>(end_ - at_) >= name.size() + 3) {
      if (at_ != first_) *at_++ = ',';
      at_ = detail::putQuoted(at_, name);
    } else {
      passEscaped(name);
    }
  }
  void passNode(std::string_view rawNode);  // the asNodeList form
  void fail(std::string_view name, Message reason) { putFailure(scratch_->failed, name, reason); }
  // FailedAndUnresolvableNodes: preemption cannot help there either.
  void failForGood(std::string_view name, Message reason) { putFailure(scratch_->unresolvable, name, reason); }
  // The answer; `error` is its Error (an answer with an error lists no node).
  std::string finish(std::string_view error = {}) &&;

 private:
  // Per thread, reused from one answer to the next: the failure maps grow to
  // tens of KiB at thousands of candidates. A second writer alive on the same
  // thread gets its own.
  struct Scratch {
    std::string failed, unresolvable;   // "name":"message" pairs, comma-separated
    std::vector<std::string> literals;  // ':' and a message as a JSON string
    Message messages = 0;               // literals in use
    bool busy = false;
  };
  void room(std::size_t bytes);
  void passEscaped(std::string_view name);
  void putFailure(std::string& to, std::string_view name, Message reason) {
    const std::string& literal = scratch_->literals[reason];
    if (!plainNames_) return putEscapedFailure(to, name, literal);
    const std::size_t at = to.size();
    to.resize(at + (at ? 1 : 0) + name.size() + 2 + literal.size());
    char* w = to.data() + at;
    if (at) *w++ = ',';
    w = detail::putQuoted(w, name);
    std::memcpy(w, literal.data(), literal.size());
  }
  static void putEscapedFailure(std::string& to, std::string_view name, const std::string& literal);

  Scratch* scratch_;
  std::unique_ptr<Scratch> own_;
  std::string out_;
  char* at_ = nullptr;  // where the next passed entry goes, inside out_
  char* end_ = nullptr;
  char* first_ = nullptr;  // where the first one went
  bool plainNames_;
  bool asNodeList_;
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
// instead of one per candidate.
constexpr bool listedScore(std::int64_t score) { return score != 0; }

// The one encoder of HostPriorityList, host by host as they are scored;
// `plainHosts`: every host needs no JSON escape (ExtenderArgs::plainNames).
class HostPriorityWriter {
 public:
  explicit HostPriorityWriter(bool plainHosts);
  // Lists the host unless listedScore says otherwise.
  void add(std::string_view host, std::int64_t score);
  // add(hosts[i], scores[i]) for every i, in one pass: the prioritize answer.
  void addAll(const std::vector<std::string_view>& hosts, const std::vector<int>& scores);
  std::string finish() &&;

 private:
  std::string out_;
  std::size_t used_ = 1;  // bytes of out_ written: '[' and the entries
  bool plainHosts_;
};
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
