#pragma once
// Informer: LIST (paged) or watch-list, then WATCH from the list's
// resourceVersion with bookmarks; 410 Gone (HTTP or ERROR event) relists;
// network failures reconnect with jittered backoff from the last seen
// resourceVersion. Decoded events go into a Store that publishes immutable
// snapshots, one per network read (batching bounds the publishing cost).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>

#include "tally/common/thread_name.hpp"
#include "tally/runtime/backoff.hpp"
#include "tally/runtime/client.hpp"
#include "tally/runtime/json_watch.hpp"
#include "tally/common/log.hpp"
#include "tally/runtime/protobuf_watch.hpp"
#include "tally/runtime/store.hpp"

namespace tally::runtime {

struct InformerOptions {
  Resource resource;
  std::string labelSelector;
  std::string fieldSelector;
  Wire wire = Wire::kJson;    // kProtobuf needs a ProtobufCodec and a built-in type
  bool useWatchList = false;  // sendInitialEvents; falls back to LIST when refused
  int64_t pageSize = 500;
  std::chrono::milliseconds resyncPeriod{0};  // ignored by a store that keeps no objects (ProjectingCodec)
  std::chrono::milliseconds backoffInitial{800};
  std::chrono::milliseconds backoffMax{30'000};
  // Server-side watch timeout is drawn from [min, 2*min) like client-go.
  int minWatchTimeoutSeconds = 300;
  std::chrono::milliseconds idleTimeout{120'000};
};

struct InformerStats {
  uint64_t lists = 0;
  uint64_t watches = 0;
  uint64_t events = 0;
  uint64_t bookmarks = 0;
  uint64_t gone = 0;         // 410s that forced a relist
  uint64_t watchErrors = 0;  // network/decode failures that restarted the watch
  uint64_t publishes = 0;
};

template <JsonCodec C>
class Informer {
 public:
  using Object = typename C::Object;
  using Snap = typename Store<C>::Snap;

  Informer(std::shared_ptr<Client> client, InformerOptions opts)
      : client_(std::move(client)), opts_(std::move(opts)), backoff_(opts_.backoffInitial, opts_.backoffMax) {}
  ~Informer() { stop(); }
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  Store<C>& store() { return store_; }
  void addHandlers(typename Store<C>::Handlers h) { store_.addHandlers(std::move(h)); }
  void addIndex(std::string name, typename Store<C>::IndexFunc fn) { store_.addIndex(std::move(name), std::move(fn)); }

  void start() {
    thread_ = std::jthread([this](std::stop_token st) { run(st); });
    nameThread(thread_.native_handle(), "watch-" + opts_.resource.resource);
    // A store that keeps no objects has none to replay.
    if (Store<C>::kKeepsObjects && opts_.resyncPeriod.count() > 0) {
      resyncThread_ = std::jthread([this](std::stop_token st) { resyncLoop(st); });
      nameThread(resyncThread_.native_handle(), "resync-" + opts_.resource.resource);
    }
  }

  void stop() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    resyncThread_.request_stop();
    {
      std::lock_guard lock(mu_);
      if (stream_) stream_->cancel();
    }
    cv_.notify_all();
    thread_.join();
    if (resyncThread_.joinable()) resyncThread_.join();
  }

  typename Store<C>::SnapshotRef snapshot() const { return store_.snapshot(); }
  bool hasSynced() const { return store_.snapshot()->synced(); }

  bool waitForSync(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!hasSynced()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // Time since the server was last heard from (event, bookmark or list).
  std::chrono::milliseconds staleness() const {
    const int64_t last = lastContact_.load(std::memory_order_relaxed);
    if (last == 0) return std::chrono::milliseconds::max();
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - std::chrono::nanoseconds(last));
  }

  InformerStats stats() const {
    std::lock_guard lock(statsMu_);
    return stats_;
  }

 private:
  enum class WatchEnd { kClosed, kGone, kError, kStopped };

  void touch() {
    lastContact_.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  }
  template <class F>
  void count(F&& f) {
    std::lock_guard lock(statsMu_);
    f(stats_);
  }

  bool sleepFor(std::stop_token& st, std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, st, d, [] { return false; });
    return !st.stop_requested();
  }

  void run(std::stop_token st) {
    bool needList = true;
    bool watchListSupported = opts_.useWatchList;
    while (!st.stop_requested()) {
      if (needList && !watchListSupported) {
        if (auto s = list(); !s) {
          logWarning("informer list failed",
                     {{"resource", opts_.resource.describe()}, {"error", s.error().describe()}});
          if (!sleepFor(st, backoff_.next())) return;
          continue;
        }
        needList = false;
      }
      WatchEnd end = watchOnce(st, needList);
      switch (end) {
        case WatchEnd::kStopped: return;
        case WatchEnd::kClosed:
          needList = false;
          backoff_.reset();
          break;
        case WatchEnd::kGone:
          count([](InformerStats& s) { ++s.gone; });
          needList = true;
          break;
        case WatchEnd::kError:
          if (needList && watchListSupported && refusedWatchList_) {
            logInfo("informer watch-list refused, using LIST", {{"resource", opts_.resource.describe()}});
            watchListSupported = false;
            continue;
          }
          if (!sleepFor(st, backoff_.next())) return;
          break;
      }
    }
  }

  Status list() {
    store_.publish();
    // A store that keeps objects takes the whole list at once; one that keeps
    // none takes it page by page, so that only a page of decoded objects is
    // alive at a time.
    constexpr bool kWhole = Store<C>::kKeepsObjects;
    std::vector<Object> items;
    ListOptions lo;
    lo.labelSelector = opts_.labelSelector;
    lo.fieldSelector = opts_.fieldSelector;
    lo.limit = opts_.pageSize;
    std::string rv;
    simdjson::ondemand::parser parser;
    if constexpr (!kWhole) store_.beginRelist();
    auto fail = [&](Error e) -> Status {
      if constexpr (!kWhole) store_.abandonRelist();
      return e;
    };
    do {
      auto resp = client_->list(opts_.resource, lo, opts_.wire);
      if (!resp) return fail(std::move(resp).error());
      if (lo.continueToken.empty() && logEnabled(LogLevel::kDebug)) {
        logDebug("informer listing", {{"resource", opts_.resource.describe()}, {"contentType", resp->contentType}});
      }
      auto page = decodePage(parser, *resp);
      if (!page) return fail(std::move(page).error());
      if constexpr (kWhole) {
        for (auto& o : page->items) items.push_back(std::move(o));
      } else {
        store_.relistPage(std::move(page->items));
      }
      rv = page->resourceVersion;
      lo.continueToken = page->continueToken;
      touch();
    } while (!lo.continueToken.empty());
    if constexpr (kWhole)
      store_.replace(std::move(items), rv);
    else
      store_.endRelist(rv);
    store_.markSynced();
    store_.publish();
    count([](InformerStats& s) {
      ++s.lists;
      ++s.publishes;
    });
    return {};
  }

  Result<ListPage<Object>> decodePage(simdjson::ondemand::parser& parser, const HttpResponse& resp) {
    if constexpr (ProtobufCodec<C>) {
      if (resp.contentType.starts_with(kContentProtobuf)) return decodeProtobufList<C>(resp.body);
    }
    return decodeJsonList<C>(parser, resp.body);
  }

  WatchEnd watchOnce(std::stop_token& st, bool initialList) {
    WatchOptions wo;
    wo.labelSelector = opts_.labelSelector;
    wo.fieldSelector = opts_.fieldSelector;
    wo.resourceVersion = initialList ? std::string() : store_.snapshot()->resourceVersion();
    wo.sendInitialEvents = initialList;
    wo.allowBookmarks = true;
    {
      std::uniform_int_distribution<int> dist(opts_.minWatchTimeoutSeconds, 2 * opts_.minWatchTimeoutSeconds - 1);
      wo.timeoutSeconds = dist(rng_);
    }
    wo.idleTimeout = opts_.idleTimeout;
    refusedWatchList_ = false;
    auto stream = client_->watch(opts_.resource, wo, opts_.wire);
    if (!stream) {
      if (st.stop_requested()) return WatchEnd::kStopped;
      const Error& e = stream.error();
      if (e.is(ErrorCode::kGone)) return WatchEnd::kGone;
      if (initialList && (e.is(ErrorCode::kBadRequest) || e.is(ErrorCode::kInvalid) || e.is(ErrorCode::kForbidden))) {
        refusedWatchList_ = true;
      }
      logWarning("informer watch failed", {{"resource", opts_.resource.describe()}, {"error", e.describe()}});
      count([](InformerStats& s) { ++s.watchErrors; });
      return WatchEnd::kError;
    }
    {
      std::lock_guard lock(mu_);
      stream_ = std::move(*stream);
      if (st.stop_requested()) stream_->cancel();
    }
    count([](InformerStats& s) { ++s.watches; });
    touch();
    WatchEnd end = pump(st, initialList);
    std::lock_guard lock(mu_);
    stream_.reset();
    return end;
  }

  template <class Decoder>
  WatchEnd pumpWith(Decoder& decoder, std::stop_token& st, bool initialList) {
    std::vector<Object> initial;  // watch-list: collected until the end bookmark
    bool inInitial = initialList;
    bool gone = false;
    std::string errorText;
    auto sink = [&](WatchEvent<Object>&& ev) {
      switch (ev.type) {
        case EventType::kBookmark:
          count([](InformerStats& s) { ++s.bookmarks; });
          if (inInitial && ev.initialEventsEnd) {
            store_.replace(std::move(initial), ev.resourceVersion);
            initial.clear();
            store_.markSynced();
            inInitial = false;
            count([](InformerStats& s) { ++s.lists; });
          } else if (!inInitial) {
            store_.setResourceVersion(std::move(ev.resourceVersion));
          }
          break;
        case EventType::kError:
          if (ev.status.code == 410 || ev.status.reason == "Expired" || ev.status.reason == "Gone")
            gone = true;
          else
            errorText = std::to_string(ev.status.code) + " " + ev.status.reason + ": " + ev.status.message;
          break;
        default:
          count([](InformerStats& s) { ++s.events; });
          if (inInitial)
            initial.push_back(std::move(*ev.object));
          else
            store_.apply(ev.type, std::move(*ev.object));
      }
    };
    for (;;) {
      auto bytes = stream_->read();
      if (!bytes) {
        if (st.stop_requested()) return WatchEnd::kStopped;
        logInfo("informer watch ended", {{"resource", opts_.resource.describe()}, {"error", bytes.error().describe()}});
        count([](InformerStats& s) { ++s.watchErrors; });
        return WatchEnd::kError;
      }
      touch();
      Status decoded = bytes->empty() ? decoder.finish(sink) : decoder.feed(*bytes, sink);
      publishBatch();
      if (!decoded) {
        logWarning("informer cannot decode the watch",
                   {{"resource", opts_.resource.describe()}, {"error", decoded.error().describe()}});
        count([](InformerStats& s) { ++s.watchErrors; });
        return WatchEnd::kError;
      }
      if (gone) return WatchEnd::kGone;
      if (!errorText.empty()) {
        logWarning("informer watch error", {{"resource", opts_.resource.describe()}, {"status", errorText}});
        count([](InformerStats& s) { ++s.watchErrors; });
        return WatchEnd::kError;
      }
      if (bytes->empty()) return inInitial ? WatchEnd::kError : WatchEnd::kClosed;
    }
  }

  void publishBatch() {
    const auto before = store_.published();
    store_.publish();
    if (store_.published() != before) count([](InformerStats& s) { ++s.publishes; });
  }

  WatchEnd pump(std::stop_token& st, bool initialList) {
    if constexpr (ProtobufCodec<C>) {
      if (stream_->contentType().starts_with(kContentProtobuf)) {
        ProtobufWatchDecoder<C> decoder;
        return pumpWith(decoder, st, initialList);
      }
    }
    JsonWatchDecoder<C> decoder;
    return pumpWith(decoder, st, initialList);
  }

  void resyncLoop(std::stop_token st) {
    while (sleepFor(st, opts_.resyncPeriod)) {
      if constexpr (Store<C>::kKeepsObjects) {
        if (hasSynced()) store_.resync();
      }
    }
  }

  std::shared_ptr<Client> client_;
  InformerOptions opts_;
  Store<C> store_;
  Backoff backoff_;
  std::mt19937 rng_{std::random_device{}()};
  bool refusedWatchList_ = false;

  std::mutex mu_;
  std::condition_variable_any cv_;
  std::unique_ptr<WatchStream> stream_;
  std::atomic<int64_t> lastContact_{0};
  mutable std::mutex statsMu_;
  InformerStats stats_;
  std::jthread thread_;
  std::jthread resyncThread_;
};

}  // namespace tally::runtime
