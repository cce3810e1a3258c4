#pragma once
// The tree's one copy-on-write map: a string-keyed hash map whose copies share
// their buckets. Copying costs one pointer per 64 buckets; a write to a bucket
// that a copy still shares clones just that bucket (and its chunk's pointers)
// first. The model's usage sums,
// the informers' stores and the extender's bound-pod rows live in these, so
// publishing a frozen copy after a handful of events costs the buckets those
// events touched, not a copy of every entry; values are written in place.
//
// Not thread-safe by itself: copies may be read concurrently, but every write
// and every release of a copy must happen on one thread, because the
// clone-or-write choice reads the bucket's reference count. SnapshotCell
// (snapshot_cell.hpp) gives exactly that: readers never copy what they read,
// and the one writer frees retired values itself.

#include <array>
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

  CowMap() : chunks_(kMinBuckets / kChunk) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  const V* find(std::string_view key) const {
    const std::uint64_t h = hashName(key);
    const Bucket* b = bucket(h);
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
    if (size_ + 1 > bucketCount() * kMaxLoad) {
      grow();
      return (*this)[key];
    }
    ++size_;
    return b.entries.emplace_back(Entry{h, std::string(key), V{}}).value;
  }

  bool erase(std::string_view key) {
    const std::uint64_t h = hashName(key);
    const Bucket* found = bucket(h);
    if (!found) return false;
    for (std::size_t i = 0; i < found->entries.size(); ++i) {
      if (found->entries[i].hash != h || found->entries[i].key != key) continue;
      Bucket& b = writable(h);  // may clone: index again into the writable copy
      b.entries[i] = std::move(b.entries.back());
      b.entries.pop_back();
      --size_;
      return true;
    }
    return false;
  }

  void clear() {
    chunks_.assign(kMinBuckets / kChunk, nullptr);
    size_ = 0;
  }

  // f(key, value) for every entry, in no particular order.
  template <class F>
  void forEach(F&& f) const {
    forEachEntry([&](const Entry& e) { f(std::string_view(e.key), e.value); });
  }

 private:
  struct Bucket {
    std::vector<Entry> entries;
  };
  // Buckets come in chunks, themselves shared between copies: a copy costs
  // one pointer per 64 buckets (a 150,000-pod informer store: 1,024), and the
  // first write to a chunk after a copy clones its 64 pointers, then the bucket.
  static constexpr std::size_t kChunk = 64;
  struct Chunk {
    std::array<std::shared_ptr<Bucket>, kChunk> buckets;
  };
  static constexpr std::size_t kMinBuckets = kChunk;
  static constexpr std::size_t kMaxLoad = 4;

  std::size_t bucketCount() const { return chunks_.size() * kChunk; }
  const Bucket* bucket(std::uint64_t h) const {
    const std::size_t i = h & (bucketCount() - 1);
    const Chunk* c = chunks_[i / kChunk].get();
    return c ? c->buckets[i % kChunk].get() : nullptr;
  }

  Bucket& writable(std::uint64_t h) {
    const std::size_t i = h & (bucketCount() - 1);
    std::shared_ptr<Chunk>& chunk = chunks_[i / kChunk];
    if (!chunk)
      chunk = std::make_shared<Chunk>();
    else if (chunk.use_count() > 1)
      chunk = std::make_shared<Chunk>(*chunk);
    std::shared_ptr<Bucket>& slot = chunk->buckets[i % kChunk];
    if (!slot)
      slot = std::make_shared<Bucket>();
    else if (slot.use_count() > 1)
      slot = std::make_shared<Bucket>(*slot);
    return *slot;
  }

  void grow() {
    CowMap next;
    next.chunks_.assign(chunks_.size() * 2, nullptr);
    next.size_ = size_;
    forEachEntry([&](const Entry& e) {
      const std::size_t i = e.hash & (next.bucketCount() - 1);
      auto& chunk = next.chunks_[i / kChunk];
      if (!chunk) chunk = std::make_shared<Chunk>();
      auto& slot = chunk->buckets[i % kChunk];
      if (!slot) slot = std::make_shared<Bucket>();
      slot->entries.push_back(e);
    });
    *this = std::move(next);
  }

  template <class F>
  void forEachEntry(F&& f) const {
    for (const auto& c : chunks_) {
      if (!c) continue;
      for (const auto& b : c->buckets) {
        if (!b) continue;
        for (const Entry& e : b->entries) f(e);
      }
    }
  }

  std::vector<std::shared_ptr<Chunk>> chunks_;  // chunks_.size() * kChunk buckets: a power of two
  std::size_t size_ = 0;
};

}  // namespace tally
