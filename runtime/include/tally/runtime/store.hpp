#pragma once
// The informer's cache. One writer thread applies watch events to its live
// maps (copy-on-write: tally/common/cow_map.hpp) and publishes an immutable
// Snapshot that shares every bucket the batch did not touch, through the
// tree's one publication cell (tally/common/snapshot_cell.hpp): readers never
// take a lock or wait for the writer's work, and hold a snapshot by its guard
// on the thread that took it. Handlers run on the writer thread after the
// snapshot that contains their change is visible.
//
// What it keeps of each object is the decoded object, or, for a codec that
// projects (ProjectingCodec), only the codec's Stored value: a decoded object
// then lives until its handlers ran, and a resync has nothing to replay.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tally/common/cow_map.hpp"
#include "tally/common/snapshot_cell.hpp"
#include "tally/runtime/codec.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/watch_event.hpp"

namespace tally::runtime {

template <class Obj>
class Snapshot {
 public:
  struct Item {
    std::string key;
    Obj value;
  };
  using ItemPtr = std::shared_ptr<const Item>;
  using Map = CowMap<ItemPtr>;
  using Bucket = std::vector<ItemPtr>;  // sorted by key
  using IndexMap = CowMap<Bucket>;

  const Obj* get(std::string_view key) const {
    // The item outlives the call only while the snapshot is held.
    const ItemPtr* item = objects_.find(key);
    return item ? &(*item)->value : nullptr;
  }
  // Keeps the object alive independently of the snapshot.
  std::shared_ptr<const Obj> share(std::string_view key) const {
    const ItemPtr* item = objects_.find(key);
    return item ? std::shared_ptr<const Obj>(*item, &(*item)->value) : nullptr;
  }
  size_t size() const { return objects_.size(); }
  // f(std::string_view key, const Obj&)
  template <class F>
  void forEach(F&& f) const {
    objects_.forEach([&](std::string_view key, const ItemPtr& item) { f(key, item->value); });
  }
  std::vector<const Obj*> byIndex(std::string_view index, std::string_view value) const {
    std::vector<const Obj*> out;
    for (const auto& [name, map] : indexes_) {
      if (name != index) continue;
      if (const Bucket* bucket = map.find(value)) {
        out.reserve(bucket->size());
        for (const auto& item : *bucket) out.push_back(&item->value);
      }
    }
    return out;
  }
  // Index values present for `index`.
  std::vector<std::string> indexValues(std::string_view index) const {
    std::vector<std::string> out;
    for (const auto& [name, map] : indexes_) {
      if (name == index) map.forEach([&](std::string_view key, const Bucket&) { out.emplace_back(key); });
    }
    return out;
  }
  const std::string& resourceVersion() const { return resourceVersion_; }
  uint64_t generation() const { return generation_; }
  bool synced() const { return synced_; }

 private:
  template <JsonCodec>
  friend class Store;
  Map objects_;
  std::vector<std::pair<std::string, IndexMap>> indexes_;
  std::string resourceVersion_;
  uint64_t generation_ = 0;
  bool synced_ = false;
};

template <JsonCodec C>
class Store {
 public:
  using Object = typename C::Object;
  using Stored = typename StoredOf<C>::type;  // Object unless the codec projects
  static constexpr bool kKeepsObjects = !ProjectingCodec<C>;
  using Snap = Snapshot<Stored>;
  using ItemPtr = typename Snap::ItemPtr;
  using IndexFunc = std::function<std::vector<std::string>(const Stored&)>;
  // A snapshot held by the thread that read it (see SnapshotCell::Guard).
  using SnapshotRef = typename SnapshotCell<Snap>::Guard;

  // An add and an update's new value are the object as decoded: the store's
  // own when it keeps objects; a projecting store hands its decoded object
  // over to be moved from (nothing else holds it), and so takes one set of
  // handlers. An update's old value and a deletion are what the store kept.
  using Delivered = std::conditional_t<kKeepsObjects, const Object&, Object&&>;
  struct Handlers {
    std::function<void(Delivered)> onAdd;
    std::function<void(const Stored& oldObj, Delivered newObj)> onUpdate;
    std::function<void(const Stored&)> onDelete;
  };

  Store() { current_.publish(std::make_unique<const Snap>()); }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Registration happens before the first event is applied.
  void addIndex(std::string name, IndexFunc fn) {
    indexFns_.emplace_back(name, std::move(fn));
    live_.indexes_.emplace_back(std::move(name), typename Snap::IndexMap());
    current_.publish(std::make_unique<const Snap>(live_));
  }
  void addHandlers(Handlers h) {
    std::lock_guard lock(handlersMu_);
    if (!kKeepsObjects && !handlers_.empty())
      throw std::logic_error("a store that keeps no objects hands each one to a single set of handlers");
    handlers_.push_back(std::move(h));
  }

  // Reader side: wait-free with respect to the writer's work.
  SnapshotRef snapshot() const { return current_.read(); }

  // ---- writer side (one thread) ----

  // Applies one ADDED/MODIFIED/DELETED event to the pending batch.
  void apply(EventType type, Object&& obj) {
    dirty_ = true;
    std::string key = C::key(obj);
    live_.resourceVersion_.assign(C::resourceVersion(obj));
    const ItemPtr* found = live_.objects_.find(key);
    ItemPtr old = found ? *found : nullptr;
    if (type == EventType::kDeleted) {
      if (old) {
        live_.objects_.erase(key);
        unindex(old);
        pending_.push_back({EventType::kDeleted, std::move(old), nullptr, {}});
      }
      return;
    }
    ItemPtr item = makeItem(key, obj);
    live_.objects_[key] = item;
    if (old) unindex(old);
    index(item);
    pending_.push_back({old ? EventType::kModified : EventType::kAdded, std::move(old), std::move(item), held(obj)});
  }

  void setResourceVersion(std::string rv) {
    dirty_ = true;
    live_.resourceVersion_ = std::move(rv);
  }

  // Replaces the whole content (after LIST or watch-list); objects missing
  // from `items` produce deletions, the rest adds or updates.
  void replace(std::vector<Object>&& items, std::string rv) {
    dirty_ = true;
    // Callers publish before relisting, so the published snapshot is the
    // baseline the handlers compare against.
    std::vector<ItemPtr> previous;
    {
      SnapshotRef published = snapshot();
      previous.reserve(published->objects_.size());
      published->objects_.forEach([&](std::string_view, const ItemPtr& p) { previous.push_back(p); });
    }
    live_.objects_.clear();
    for (auto& idx : live_.indexes_) idx.second.clear();
    relisted_.clear();
    relisted_.reserve(items.size());
    for (auto& obj : items) {
      std::string key = C::key(obj);
      ItemPtr item = makeItem(key, obj);
      ItemPtr& slot = live_.objects_[key];
      if (slot) {
        // Listed twice: the later one stands, reported once.
        unindex(slot);
        std::erase_if(relisted_, [&](const Change& c) { return c.newItem == slot; });
      }
      slot = item;
      index(item);
      relisted_.push_back({EventType::kAdded, nullptr, std::move(item), held(obj)});
    }
    for (auto& old : previous) {
      if (!live_.objects_.contains(old->key)) pending_.push_back({EventType::kDeleted, old, nullptr, {}});
    }
    items.clear();
    replaced_ = true;
    replacedPrevious_ = std::move(previous);
    live_.resourceVersion_ = std::move(rv);
  }

  // A relist in pages, for a store that keeps no objects (it has none to
  // report later, and a list's decoded objects need not all be alive at
  // once): each page's adds and updates against the published content go to
  // the handlers as the page arrives, before the snapshot holding them is
  // published; endRelist queues the deletions, which follow the publication
  // as with replace(). Callers publish before beginRelist. A relist given up
  // half-way (abandonRelist) keeps what its pages delivered and deletes
  // nothing: the next relist compares against that.
  void beginRelist() requires(!kKeepsObjects) {
    dirty_ = true;
    relistBaseline_.clear();
    {
      SnapshotRef published = snapshot();
      relistBaseline_.reserve(published->objects_.size());
      published->objects_.forEach([&](std::string_view, const ItemPtr& p) { relistBaseline_.push_back(p); });
    }
    std::sort(relistBaseline_.begin(), relistBaseline_.end(),
              [](const ItemPtr& a, const ItemPtr& b) { return a->key < b->key; });
    relistSeen_.assign(relistBaseline_.size(), false);
  }
  void relistPage(std::vector<Object>&& items) requires(!kKeepsObjects) {
    dirty_ = true;
    for (auto& obj : items) {
      std::string key = C::key(obj);
      auto it = std::lower_bound(relistBaseline_.begin(), relistBaseline_.end(), key, keyBefore);
      if (it != relistBaseline_.end() && (*it)->key == key) relistSeen_[it - relistBaseline_.begin()] = true;
      ItemPtr& slot = live_.objects_[key];
      ItemPtr old = slot;
      if (old && C::resourceVersion(old->value) == C::resourceVersion(obj)) continue;
      ItemPtr item = makeItem(key, obj);
      slot = item;
      if (old) unindex(old);
      index(item);
      Change change{old ? EventType::kModified : EventType::kAdded, std::move(old), std::move(item), held(obj)};
      std::lock_guard lock(handlersMu_);
      deliver(change);
    }
    items.clear();
  }
  void endRelist(std::string rv) requires(!kKeepsObjects) {
    for (std::size_t i = 0; i < relistBaseline_.size(); ++i) {
      const ItemPtr& old = relistBaseline_[i];
      if (relistSeen_[i]) continue;
      live_.objects_.erase(old->key);
      unindex(old);
      pending_.push_back({EventType::kDeleted, old, nullptr, {}});
    }
    abandonRelist();
    live_.resourceVersion_ = std::move(rv);
  }
  void abandonRelist() requires(!kKeepsObjects) {
    dirty_ = true;
    relistBaseline_ = {};
    relistSeen_ = {};
  }

  void markSynced() {
    dirty_ = true;
    live_.synced_ = true;
  }

  // Makes the batch visible and then runs the handlers for it.
  void publish() {
    if (!dirty_) return;
    dirty_ = false;
    live_.generation_ = ++generation_;
    // The copy shares every bucket with the live maps; the next write to one
    // clones just that bucket.
    current_.publish(std::make_unique<const Snap>(live_));
    dispatch();
  }

  // Calls onUpdate(obj, obj) for every object (client-go's resync).
  void resync() requires kKeepsObjects {
    auto snap = snapshot();
    std::lock_guard lock(handlersMu_);
    snap->forEach([&](std::string_view, const Object& obj) {
      for (auto& h : handlers_)
        safeCall([&] {
          if (h.onUpdate) h.onUpdate(obj, obj);
        });
    });
  }

  uint64_t published() const { return generation_; }

 private:
  // A projecting store holds an add's or an update's decoded object here
  // until its handlers ran; a store that keeps objects has it in newItem.
  struct NothingHeld {};
  using Held = std::conditional_t<kKeepsObjects, NothingHeld, std::optional<Object>>;
  struct Change {
    EventType type;
    ItemPtr oldItem;
    ItemPtr newItem;
    [[no_unique_address]] Held decoded;
  };

  // Takes what it keeps of `obj`: all of it (obj is moved from) or its projection.
  static ItemPtr makeItem(const std::string& key, Object& obj) {
    if constexpr (kKeepsObjects)
      return std::make_shared<const typename Snap::Item>(typename Snap::Item{key, std::move(obj)});
    else
      return std::make_shared<const typename Snap::Item>(typename Snap::Item{key, C::stored(obj)});
  }
  // After makeItem: what the change holds of `obj` until dispatch.
  static Held held(Object& obj) {
    if constexpr (kKeepsObjects)
      return {};
    else
      return std::move(obj);
  }
  static Delivered decodedOf(Change& c) {
    if constexpr (kKeepsObjects)
      return c.newItem->value;
    else
      return std::move(*c.decoded);
  }

  static bool keyBefore(const ItemPtr& p, const std::string& k) { return p->key < k; }

  void index(const ItemPtr& item) {
    for (size_t i = 0; i < indexFns_.size(); ++i) {
      for (auto& value : indexFns_[i].second(item->value)) {
        typename Snap::Bucket& b = live_.indexes_[i].second[value];
        auto pos = std::lower_bound(b.begin(), b.end(), item->key, keyBefore);
        if (pos != b.end() && (*pos)->key == item->key)
          *pos = item;
        else
          b.insert(pos, item);
      }
    }
  }

  void unindex(const ItemPtr& item) {
    for (size_t i = 0; i < indexFns_.size(); ++i) {
      for (auto& value : indexFns_[i].second(item->value)) {
        auto& map = live_.indexes_[i].second;
        const typename Snap::Bucket* found = map.find(value);
        if (!found) continue;
        auto at = std::lower_bound(found->begin(), found->end(), item->key, keyBefore);
        if (at == found->end() || (*at)->key != item->key) continue;
        const auto offset = at - found->begin();
        typename Snap::Bucket& b = map[value];  // may clone the bucket: index again
        b.erase(b.begin() + offset);
        if (b.empty()) map.erase(value);
      }
    }
  }

  template <class F>
  static void safeCall(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      logError("informer handler threw", {{"error", e.what()}});
    } catch (...) {
      logError("informer handler threw a non-standard exception");
    }
  }

  void dispatch() {
    std::vector<Change> changes = std::move(pending_);
    pending_.clear();
    if (replaced_) {
      // After a relist, compare what was listed with what was there before;
      // then the deletions and whatever was applied after the relist.
      std::vector<ItemPtr> previous = std::move(replacedPrevious_);
      std::vector<Change> relisted = std::move(relisted_);
      relisted_.clear();
      replaced_ = false;
      std::vector<Change> deltas;
      std::sort(previous.begin(), previous.end(), [](const ItemPtr& a, const ItemPtr& b) { return a->key < b->key; });
      for (Change& c : relisted) {
        auto it = std::lower_bound(previous.begin(), previous.end(), c.newItem->key, keyBefore);
        if (it == previous.end() || (*it)->key != c.newItem->key) {
          deltas.push_back(std::move(c));
        } else if (C::resourceVersion((*it)->value) != C::resourceVersion(c.newItem->value)) {
          c.type = EventType::kModified;
          c.oldItem = *it;
          deltas.push_back(std::move(c));
        }
      }
      relisted = {};
      for (auto& c : changes) deltas.push_back(std::move(c));
      changes = std::move(deltas);
    }
    std::lock_guard lock(handlersMu_);
    for (Change& c : changes) deliver(c);
  }

  // Calls the handlers for one change (handlersMu_ held).
  void deliver(Change& c) {
    for (auto& h : handlers_) {
      safeCall([&] {
        switch (c.type) {
          case EventType::kAdded:
            if (h.onAdd) h.onAdd(decodedOf(c));
            break;
          case EventType::kModified:
            if (h.onUpdate) h.onUpdate(c.oldItem->value, decodedOf(c));
            break;
          case EventType::kDeleted:
            if (h.onDelete) h.onDelete(c.oldItem->value);
            break;
          default: break;
        }
      });
    }
    if constexpr (!kKeepsObjects) c.decoded.reset();  // freed as the batch goes, not at its end
  }

  SnapshotCell<Snap> current_;
  std::vector<std::pair<std::string, IndexFunc>> indexFns_;
  std::mutex handlersMu_;
  std::vector<Handlers> handlers_;

  // Writer-only state: the content the next snapshot publishes.
  Snap live_;
  bool dirty_ = false;
  std::vector<Change> pending_;
  std::vector<Change> relisted_;  // the adds of the last replace, in list order
  std::vector<ItemPtr> replacedPrevious_;
  std::vector<ItemPtr> relistBaseline_;  // a paged relist's published content, by key
  std::vector<bool> relistSeen_;         // which of it the relist listed so far
  bool replaced_ = false;
  uint64_t generation_ = 0;
};

}  // namespace tally::runtime
