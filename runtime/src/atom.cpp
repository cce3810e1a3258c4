#include "tally/runtime/atom.hpp"

#include <array>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace tally::runtime {
namespace {

struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct Eq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

// Sharded so concurrent decoders rarely contend; node-based sets keep
// element addresses stable.
struct Shard {
  std::mutex mu;
  std::unordered_set<std::string, Hash, Eq> strings;
};
constexpr size_t kShards = 16;

std::array<Shard, kShards>& shards() {
  static auto* s = new std::array<Shard, kShards>();  // never destroyed: atoms outlive statics
  return *s;
}

const std::string* internShared(std::string_view s) {
  Shard& shard = shards()[Hash{}(s) % kShards];
  std::lock_guard lock(shard.mu);
  auto it = shard.strings.find(s);
  if (it == shard.strings.end()) it = shard.strings.emplace(s).first;
  return &*it;
}

// A per-thread cache in front of the shared pool keeps decoders off the locks;
// its keys view the pooled strings, which never move.
const std::string* intern(std::string_view s) {
  thread_local std::unordered_map<std::string_view, const std::string*> cache;
  auto it = cache.find(s);
  if (it != cache.end()) return it->second;
  const std::string* pooled = internShared(s);
  if (cache.size() < 65536) cache.emplace(std::string_view(*pooled), pooled);
  return pooled;
}

}  // namespace

Atom::Atom() : s_(intern({})) {}
Atom::Atom(std::string_view s) : s_(intern(s)) {}

size_t Atom::poolSize() {
  size_t n = 0;
  for (auto& shard : shards()) {
    std::lock_guard lock(shard.mu);
    n += shard.strings.size();
  }
  return n;
}

}  // namespace tally::runtime
