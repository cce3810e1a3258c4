#pragma once
// An immutable hash map with structural sharing: a fixed two-level trie
// (64 x 64 buckets) of copy-on-write leaves. Changing one key copies the
// root, one middle node and one leaf, so publishing a new version costs
// O(64 + 64 + n/4096) pointer copies instead of O(n). A Transient batches
// many changes and copies each node at most once per batch.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tally::runtime {

template <class V>
class PersistentMap {
 public:
  struct Item {
    std::string key;
    V value;
  };
  using ItemPtr = std::shared_ptr<const Item>;
  static constexpr size_t kFanout = 64;

 private:
  struct Slot {
    uint64_t hash;
    ItemPtr item;
  };
  struct Leaf {
    uint64_t edit = 0;
    std::vector<Slot> slots;
  };
  struct Mid {
    uint64_t edit = 0;
    std::array<std::shared_ptr<Leaf>, kFanout> leaves;
  };
  struct Root {
    uint64_t edit = 0;
    size_t size = 0;
    std::array<std::shared_ptr<Mid>, kFanout> mids;
  };

  static uint64_t hashOf(std::string_view key) {
    // Mix std::hash so the top bits used for routing are well spread.
    uint64_t h = std::hash<std::string_view>{}(key);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
  }
  static size_t midIndex(uint64_t h) { return static_cast<size_t>(h >> 58); }
  static size_t leafIndex(uint64_t h) { return static_cast<size_t>((h >> 52) & 63); }
  static uint64_t nextEdit() {
    static std::atomic<uint64_t> counter{1};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }

  static const Slot* findSlot(const Root* root, std::string_view key, uint64_t h) {
    if (!root) return nullptr;
    const Mid* mid = root->mids[midIndex(h)].get();
    if (!mid) return nullptr;
    const Leaf* leaf = mid->leaves[leafIndex(h)].get();
    if (!leaf) return nullptr;
    for (const Slot& s : leaf->slots) {
      if (s.hash == h && s.item->key == key) return &s;
    }
    return nullptr;
  }

 public:
  PersistentMap() = default;

  size_t size() const { return root_ ? root_->size : 0; }
  bool empty() const { return size() == 0; }

  ItemPtr find(std::string_view key) const {
    const Slot* s = findSlot(root_.get(), key, hashOf(key));
    return s ? s->item : nullptr;
  }

  // f(const Item&) for every item, in no particular order.
  template <class F>
  void forEach(F&& f) const {
    if (!root_) return;
    for (const auto& mid : root_->mids) {
      if (!mid) continue;
      for (const auto& leaf : mid->leaves) {
        if (!leaf) continue;
        for (const Slot& s : leaf->slots) f(*s.item);
      }
    }
  }
  template <class F>
  void forEachItemPtr(F&& f) const {
    if (!root_) return;
    for (const auto& mid : root_->mids) {
      if (!mid) continue;
      for (const auto& leaf : mid->leaves) {
        if (!leaf) continue;
        for (const Slot& s : leaf->slots) f(s.item);
      }
    }
  }

  class Transient {
   public:
    explicit Transient(const PersistentMap& base) : root_(base.root_), edit_(nextEdit()) {}

    size_t size() const { return root_ ? root_->size : 0; }
    ItemPtr find(std::string_view key) const {
      const Slot* s = findSlot(root_.get(), key, hashOf(key));
      return s ? s->item : nullptr;
    }

    // Inserts or replaces; returns the previous item, if any.
    ItemPtr set(ItemPtr item) {
      const uint64_t h = hashOf(item->key);
      Leaf* leaf = ownLeaf(h);
      for (Slot& s : leaf->slots) {
        if (s.hash == h && s.item->key == item->key) {
          ItemPtr old = std::move(s.item);
          s.item = std::move(item);
          return old;
        }
      }
      leaf->slots.push_back(Slot{h, std::move(item)});
      ++root_->size;
      return nullptr;
    }

    // Removes the key; returns the removed item, if any.
    ItemPtr erase(std::string_view key) {
      const uint64_t h = hashOf(key);
      if (!findSlot(root_.get(), key, h)) return nullptr;
      Leaf* leaf = ownLeaf(h);
      for (size_t i = 0; i < leaf->slots.size(); ++i) {
        if (leaf->slots[i].hash == h && leaf->slots[i].item->key == key) {
          ItemPtr old = std::move(leaf->slots[i].item);
          leaf->slots[i] = std::move(leaf->slots.back());
          leaf->slots.pop_back();
          --root_->size;
          return old;
        }
      }
      return nullptr;
    }

    void clear() { root_.reset(); }

    // Ends the batch; the transient must not be used afterwards.
    PersistentMap persistent() && {
      PersistentMap out;
      out.root_ = std::move(root_);
      edit_ = 0;
      return out;
    }

   private:
    Leaf* ownLeaf(uint64_t h) {
      if (!root_) {
        root_ = std::make_shared<Root>();
        root_->edit = edit_;
      } else if (root_->edit != edit_) {
        root_ = std::make_shared<Root>(*root_);
        root_->edit = edit_;
      }
      auto& mid = root_->mids[midIndex(h)];
      if (!mid) {
        mid = std::make_shared<Mid>();
        mid->edit = edit_;
      } else if (mid->edit != edit_) {
        mid = std::make_shared<Mid>(*mid);
        mid->edit = edit_;
      }
      auto& leaf = mid->leaves[leafIndex(h)];
      if (!leaf) {
        leaf = std::make_shared<Leaf>();
        leaf->edit = edit_;
      } else if (leaf->edit != edit_) {
        leaf = std::make_shared<Leaf>(*leaf);
        leaf->edit = edit_;
      }
      return leaf.get();
    }

    std::shared_ptr<Root> root_;
    uint64_t edit_;
  };

 private:
  // Nodes reachable from a published map are never written again: only a
  // transient holding the node's edit id writes, and persistent() retires it.
  std::shared_ptr<Root> root_;
};

}  // namespace tally::runtime
