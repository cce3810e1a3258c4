#pragma once
// An Observer and Extension for the state tests: the keys of the pods the
// cache holds, published as a std::set; counts the hook calls.

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tally/state/writer.hpp"

namespace tally::state::testing {

class RecordingExtension final : public Observer, public Extension<std::set<std::string>> {
 public:
  using Keys = std::set<std::string>;
  void podChanged(const std::string& key, const model::Pod* pod) override {
    if (pod)
      keys_.insert(key);
    else
      keys_.erase(key);
  }
  void objectChanged(model::Kind kind, const std::string& key) override {
    changed.push_back(std::string(model::toString(kind)) + ":" + key);
  }
  bool tick(model::UsageIndex&, Clock::time_point now) override {
    if (due_ == Clock::time_point::max() || now < due_) return false;
    due_ = Clock::time_point::max();
    ++ticksDue;
    return true;
  }
  Clock::time_point nextDeadline() const override { return due_; }
  std::shared_ptr<const Keys> publish(const model::Cluster&) override { return std::make_shared<const Keys>(keys_); }
  void published(const Snapshot& snapshot) override { lastGeneration = snapshot.generation; }
  void stopped() override { stoppedCalls.fetch_add(1); }

  // Writer thread only.
  void dueAt(Clock::time_point at) { due_ = at; }

  std::atomic<std::uint64_t> lastGeneration{0};
  std::atomic<int> stoppedCalls{0};
  std::atomic<int> ticksDue{0};
  std::vector<std::string> changed;  // "Kind:key" per objectChanged, writer thread (read after flush)

 private:
  Keys keys_;
  Clock::time_point due_ = Clock::time_point::max();
};

}  // namespace tally::state::testing
