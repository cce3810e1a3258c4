#pragma once
// The informer's cache. One writer thread applies watch events to a
// transient copy and publishes an immutable Snapshot; any number of readers
// take the current snapshot with a pointer copy and never wait for the
// writer's work. Handlers run on the writer thread after the snapshot that
// contains their change is visible.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/runtime/codec.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/persistent_map.hpp"
#include "tally/runtime/published_ptr.hpp"
#include "tally/runtime/watch_event.hpp"

namespace tally::runtime {

template <class Obj>
class Snapshot {
 public:
  using Map = PersistentMap<Obj>;
  using ItemPtr = typename Map::ItemPtr;
  using Bucket = std::vector<ItemPtr>;  // sorted by key
  using IndexMap = PersistentMap<Bucket>;

  const Obj* get(std::string_view key) const {
    // The item outlives the call only while the snapshot is held.
    auto item = objects_.find(key);
    return item ? &item->value : nullptr;
  }
  // Keeps the object alive independently of the snapshot.
  std::shared_ptr<const Obj> share(std::string_view key) const {
    auto item = objects_.find(key);
    return item ? std::shared_ptr<const Obj>(item, &item->value) : nullptr;
  }
  size_t size() const { return objects_.size(); }
  // f(std::string_view key, const Obj&)
  template <class F>
  void forEach(F&& f) const {
    objects_.forEach([&](const typename Map::Item& it) { f(std::string_view(it.key), it.value); });
  }
  std::vector<const Obj*> byIndex(std::string_view index, std::string_view value) const {
    std::vector<const Obj*> out;
    for (const auto& [name, map] : indexes_) {
      if (name != index) continue;
      if (auto bucket = map.find(value)) {
        out.reserve(bucket->value.size());
        for (const auto& item : bucket->value) out.push_back(&item->value);
      }
    }
    return out;
  }
  // Index values present for `index`.
  std::vector<std::string> indexValues(std::string_view index) const {
    std::vector<std::string> out;
    for (const auto& [name, map] : indexes_) {
      if (name == index) map.forEach([&](const typename IndexMap::Item& it) { out.push_back(it.key); });
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
  using Snap = Snapshot<Object>;
  using ItemPtr = typename Snap::ItemPtr;
  using IndexFunc = std::function<std::vector<std::string>(const Object&)>;

  struct Handlers {
    std::function<void(const Object&)> onAdd;
    std::function<void(const Object& oldObj, const Object& newObj)> onUpdate;
    std::function<void(const Object&)> onDelete;
  };

  Store() : current_(std::make_shared<const Snap>()) {}
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Registration happens before the first event is applied.
  void addIndex(std::string name, IndexFunc fn) {
    indexFns_.emplace_back(name, std::move(fn));
    auto snap = std::make_shared<Snap>(*snapshot());
    snap->indexes_.emplace_back(std::move(name), typename Snap::IndexMap());
    current_.store(std::move(snap));
  }
  void addHandlers(Handlers h) {
    std::lock_guard lock(handlersMu_);
    handlers_.push_back(std::move(h));
  }

  // Reader side: lock-free with respect to the writer's work.
  std::shared_ptr<const Snap> snapshot() const { return current_.load(); }

  // ---- writer side (one thread) ----

  // Applies one ADDED/MODIFIED/DELETED event to the pending batch.
  void apply(EventType type, Object&& obj) {
    begin();
    std::string key = C::key(obj);
    rv_.assign(C::resourceVersion(obj));
    if (type == EventType::kDeleted) {
      ItemPtr old = edit_->erase(key);
      if (old) {
        unindex(old);
        pending_.push_back({EventType::kDeleted, std::move(old), nullptr});
      }
      return;
    }
    auto item =
        std::make_shared<const typename Snap::Map::Item>(typename Snap::Map::Item{std::move(key), std::move(obj)});
    ItemPtr old = edit_->set(item);
    if (old) unindex(old);
    index(item);
    pending_.push_back({old ? EventType::kModified : EventType::kAdded, std::move(old), std::move(item)});
  }

  void setResourceVersion(std::string rv) {
    begin();
    rv_ = std::move(rv);
  }

  // Replaces the whole content (after LIST or watch-list); objects missing
  // from `items` produce deletions, the rest adds or updates.
  void replace(std::vector<Object>&& items, std::string rv) {
    begin();
    // Callers publish before relisting, so the published snapshot is the
    // baseline the handlers compare against.
    std::vector<ItemPtr> previous;
    previous.reserve(edit_->size());
    snapshot()->objects_.forEachItemPtr([&](const ItemPtr& p) { previous.push_back(p); });
    edit_->clear();
    for (auto& idx : indexEdits_) idx.second.clear();
    for (auto& obj : items) {
      std::string key = C::key(obj);
      auto item =
          std::make_shared<const typename Snap::Map::Item>(typename Snap::Map::Item{std::move(key), std::move(obj)});
      edit_->set(item);
      index(item);
    }
    for (auto& old : previous) {
      if (!edit_->find(old->key)) pending_.push_back({EventType::kDeleted, old, nullptr});
    }
    items.clear();
    replaced_ = true;
    replacedPrevious_ = std::move(previous);
    rv_ = std::move(rv);
  }

  void markSynced() {
    begin();
    synced_ = true;
  }

  // Makes the batch visible and then runs the handlers for it.
  void publish() {
    if (!edit_) return;
    auto snap = std::make_shared<Snap>();
    snap->objects_ = std::move(*edit_).persistent();
    for (auto& [name, idx] : indexEdits_) snap->indexes_.emplace_back(name, std::move(idx).persistent());
    snap->resourceVersion_ = rv_;
    snap->synced_ = synced_;
    snap->generation_ = ++generation_;
    edit_.reset();
    indexEdits_.clear();
    std::shared_ptr<const Snap> published = snap;
    current_.store(published);
    dispatch(*published);
  }

  // Calls onUpdate(obj, obj) for every object (client-go's resync).
  void resync() {
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
  struct Change {
    EventType type;
    ItemPtr oldItem;
    ItemPtr newItem;
  };

  void begin() {
    if (edit_) return;
    auto snap = snapshot();
    edit_.emplace(snap->objects_);
    indexEdits_.clear();
    for (const auto& [name, map] : snap->indexes_)
      indexEdits_.emplace_back(name, typename Snap::IndexMap::Transient(map));
    rv_ = snap->resourceVersion_;
    synced_ = snap->synced_;
  }

  void index(const ItemPtr& item) {
    for (size_t i = 0; i < indexFns_.size(); ++i) {
      for (auto& value : indexFns_[i].second(item->value)) {
        auto& tr = indexEdits_[i].second;
        auto bucket = tr.find(value);
        typename Snap::Bucket b = bucket ? bucket->value : typename Snap::Bucket{};
        auto pos = std::lower_bound(b.begin(), b.end(), item->key,
                                    [](const ItemPtr& p, const std::string& k) { return p->key < k; });
        if (pos != b.end() && (*pos)->key == item->key)
          *pos = item;
        else
          b.insert(pos, item);
        tr.set(
            std::make_shared<const typename Snap::IndexMap::Item>(typename Snap::IndexMap::Item{value, std::move(b)}));
      }
    }
  }

  void unindex(const ItemPtr& item) {
    for (size_t i = 0; i < indexFns_.size(); ++i) {
      for (auto& value : indexFns_[i].second(item->value)) {
        auto& tr = indexEdits_[i].second;
        auto bucket = tr.find(value);
        if (!bucket) continue;
        typename Snap::Bucket b = bucket->value;
        auto pos = std::lower_bound(b.begin(), b.end(), item->key,
                                    [](const ItemPtr& p, const std::string& k) { return p->key < k; });
        if (pos == b.end() || (*pos)->key != item->key) continue;
        b.erase(pos);
        if (b.empty())
          tr.erase(value);
        else
          tr.set(std::make_shared<const typename Snap::IndexMap::Item>(
              typename Snap::IndexMap::Item{value, std::move(b)}));
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

  void dispatch(const Snap& snap) {
    std::vector<Change> changes = std::move(pending_);
    pending_.clear();
    if (replaced_) {
      // After a relist, compare the new content with what was there before.
      std::vector<ItemPtr> previous = std::move(replacedPrevious_);
      replaced_ = false;
      std::vector<Change> deltas;
      std::sort(previous.begin(), previous.end(), [](const ItemPtr& a, const ItemPtr& b) { return a->key < b->key; });
      snap.objects_.forEachItemPtr([&](const ItemPtr& now) {
        auto it = std::lower_bound(previous.begin(), previous.end(), now->key,
                                   [](const ItemPtr& p, const std::string& k) { return p->key < k; });
        if (it != previous.end() && (*it)->key == now->key) {
          if (C::resourceVersion((*it)->value) != C::resourceVersion(now->value)) {
            deltas.push_back({EventType::kModified, *it, now});
          }
        } else {
          deltas.push_back({EventType::kAdded, nullptr, now});
        }
      });
      for (auto& c : changes) deltas.push_back(std::move(c));  // the deletions
      changes = std::move(deltas);
    }
    std::lock_guard lock(handlersMu_);
    for (const Change& c : changes) {
      for (auto& h : handlers_) {
        safeCall([&] {
          switch (c.type) {
            case EventType::kAdded:
              if (h.onAdd) h.onAdd(c.newItem->value);
              break;
            case EventType::kModified:
              if (h.onUpdate) h.onUpdate(c.oldItem->value, c.newItem->value);
              break;
            case EventType::kDeleted:
              if (h.onDelete) h.onDelete(c.oldItem->value);
              break;
            default: break;
          }
        });
      }
    }
  }

  PublishedPtr<Snap> current_;
  std::vector<std::pair<std::string, IndexFunc>> indexFns_;
  std::mutex handlersMu_;
  std::vector<Handlers> handlers_;

  // Writer-only state.
  std::optional<typename Snap::Map::Transient> edit_;
  std::vector<std::pair<std::string, typename Snap::IndexMap::Transient>> indexEdits_;
  std::vector<Change> pending_;
  std::vector<ItemPtr> replacedPrevious_;
  bool replaced_ = false;
  std::string rv_;
  bool synced_ = false;
  uint64_t generation_ = 0;
};

}  // namespace tally::runtime
