#pragma once
// Interned strings for bounded vocabularies that repeat across hundreds of
// thousands of cached objects (resource names, label keys, node names,
// phases, container names). An Atom is one pointer; equal strings share one
// copy. The pool never shrinks, so never intern per-object unique values
// (names, uids, resourceVersions).

#include <string>
#include <string_view>

namespace tally::runtime {

class Atom {
 public:
  Atom();  // the empty string
  explicit Atom(std::string_view s);

  std::string_view view() const { return *s_; }
  const std::string& str() const { return *s_; }
  bool empty() const { return s_->empty(); }
  bool operator==(const Atom& o) const { return s_ == o.s_; }
  bool operator==(std::string_view o) const { return *s_ == o; }

  // Number of distinct strings interned (for tests and metrics).
  static size_t poolSize();

 private:
  const std::string* s_;
};

}  // namespace tally::runtime
