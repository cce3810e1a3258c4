#pragma once
// The tree's one copy-on-write map: a string-keyed hash map whose copies share
// their buckets. Copying costs one pointer per bucket; a write to a bucket that
// a copy still shares clones just that bucket first. The model's usage sums,
// the informers' stores and the extender's bound-pod rows live in these, so
// publishing a frozen copy after a handful of events costs the buckets those
// events touched, not a copy of every entry; values are written in place.
//
// Not thread-safe by itself: copies may be read concurrently, but every write
// and every release of a copy must happen on one thread, because the
// clone-or-write choice reads the bucket's reference count. SnapshotCell
// (snapshot_cell.hpp) gives exactly that: readers never copy what they read,
// and the one writer frees retired values itself.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tally {

// A hash of a short name (node, namespace, pod key): eight bytes at a time,
// each folded in with a multiply, then finished so that the low bits a bucket
// index uses depend on every byte.
inline std::uint64_t hashName(std::string_view s) {
  const char* p = s.data();
  const std::size_t n = s.size();
  auto load8 = [](const char* at) {
    std::uint64_t w;
    std::memcpy(&w, at, 8);
    return w;
  };
  auto load4 = [](const char* at) {
    std::uint32_t w;
    std::memcpy(&w, at, 4);
    return static_cast<std::uint64_t>(w);
  };
  std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    h = (h ^ load8(p + i)) * 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 31;
  }
  if (i < n) {
    // The last bytes in whole loads (overlapping what was hashed when the name
    // is long enough): no byte-by-byte copy through memory.
    std::uint64_t w;
    if (n >= 8)
      w = load8(p + n - 8);
    else if (n >= 4)
      w = (load4(p) << 32) | load4(p + n - 4);
    else {
      w = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
          (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
          static_cast<std::uint64_t>(static_cast<unsigned char>(p[n - 1]));
    }
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
  }
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ULL;
  h ^= h >> 32;
  return h;
}

template <class V>
class CowMap {
 public:
  struct Entry {
    std::uint64_t hash;
    std::string key;
    V value;
  };

  CowMap() : buckets_(kMinBuckets) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  const V* find(std::string_view key) const {
    const std::uint64_t h = hashName(key);
    const Bucket* b = buckets_[h & (buckets_.size() - 1)].get();
    if (!b) return nullptr;
    for (const Entry& e : b->entries) {
      if (e.hash == h && e.key == key) return &e.value;
    }
    return nullptr;
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // The value under `key`, inserted value-initialised when absent.
  V& operator[](std::string_view key) {
    const std::uint64_t h = hashName(key);
    Bucket& b = writable(h);
    for (Entry& e : b.entries) {
      if (e.hash == h && e.key == key) return e.value;
    }
    if (size_ + 1 > buckets_.size() * kMaxLoad) {
      grow();
      return (*this)[key];
    }
    ++size_;
    return b.entries.emplace_back(Entry{h, std::string(key), V{}}).value;
  }

  bool erase(std::string_view key) {
    const std::uint64_t h = hashName(key);
    std::shared_ptr<Bucket>& slot = buckets_[h & (buckets_.size() - 1)];
    if (!slot) return false;
    auto& entries = slot->entries;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].hash != h || entries[i].key != key) continue;
      Bucket& b = writable(h);  // may clone: index again into the writable copy
      b.entries[i] = std::move(b.entries.back());
      b.entries.pop_back();
      --size_;
      return true;
    }
    return false;
  }

  void clear() {
    buckets_.assign(kMinBuckets, nullptr);
    size_ = 0;
  }

  // f(key, value) for every entry, in no particular order.
  template <class F>
  void forEach(F&& f) const {
    for (const auto& b : buckets_) {
      if (!b) continue;
      for (const Entry& e : b->entries) f(std::string_view(e.key), e.value);
    }
  }

 private:
  struct Bucket {
    std::vector<Entry> entries;
  };
  static constexpr std::size_t kMinBuckets = 16;
  static constexpr std::size_t kMaxLoad = 4;

  Bucket& writable(std::uint64_t h) {
    std::shared_ptr<Bucket>& slot = buckets_[h & (buckets_.size() - 1)];
    if (!slot)
      slot = std::make_shared<Bucket>();
    else if (slot.use_count() > 1)
      slot = std::make_shared<Bucket>(*slot);
    return *slot;
  }

  void grow() {
    std::vector<std::shared_ptr<Bucket>> next(buckets_.size() * 2);
    for (const auto& b : buckets_) {
      if (!b) continue;
      for (const Entry& e : b->entries) {
        auto& slot = next[e.hash & (next.size() - 1)];
        if (!slot) slot = std::make_shared<Bucket>();
        slot->entries.push_back(e);
      }
    }
    buckets_ = std::move(next);
  }

  std::vector<std::shared_ptr<Bucket>> buckets_;  // size: a power of two
  std::size_t size_ = 0;
};

}  // namespace tally
