#include "yaml_guard.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <map>
#include <sstream>
#include <vector>

namespace tally::codec {
namespace {

// Counts the nodes a load would make: an alias costs what its anchor's node
// cost, so the count is the expanded size. Stops counting once over the limit.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(const YamlLimits& limits) : limits_(limits) {}

  std::optional<std::string> refusal;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = sizes_.find(anchor);
    add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    std::size_t countAtStart;
  };

  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1);
    if (anchor) sizes_[anchor] = 1;
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    add(mark, 1);
    stack_.push_back({anchor, count_ - 1});
    if (!refusal && stack_.size() > limits_.maxDepth) {
      refusal = fmt::format("YAML nested {} levels deep at line {} (at most {})", stack_.size(), mark.line + 1,
                            limits_.maxDepth);
    }
  }
  void close() {
    if (stack_.empty()) return;
    const Open top = stack_.back();
    stack_.pop_back();
    if (top.anchor) sizes_[top.anchor] = count_ - top.countAtStart;
  }
  void add(const YAML::Mark& mark, std::size_t nodes) {
    if (refusal) return;
    count_ += nodes;
    if (count_ > limits_.maxNodes) {
      refusal = fmt::format("YAML expands to more than {} nodes (aliases included) by line {}", limits_.maxNodes,
                            mark.line + 1);
    }
  }

  const YamlLimits& limits_;
  std::size_t count_ = 0;
  std::vector<Open> stack_;
  std::map<YAML::anchor_t, std::size_t> sizes_;
};

}  // namespace

std::optional<std::string> yamlExpansionRefusal(std::string_view text, const YamlLimits& limits) {
  std::istringstream in{std::string(text)};
  ExpansionCounter counter(limits);
  try {
    YAML::Parser parser(in);
    while (!counter.refusal && parser.HandleNextDocument(counter)) {
    }
  } catch (const std::exception&) {
    // Malformed: the load reports it with yaml-cpp's own message.
  }
  return counter.refusal;
}

}  // namespace tally::codec
