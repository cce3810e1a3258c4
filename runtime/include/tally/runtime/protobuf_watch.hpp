#pragma once
// Protobuf watch streams: each frame is a 4-byte big-endian length followed
// by a metav1.WatchEvent{type = 1, object = 2 (RawExtension{raw = 1})} whose
// raw bytes are "k8s\0" + runtime.Unknown{raw = the typed object}. LIST and
// GET bodies are the envelope alone.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "tally/runtime/codec.hpp"
#include "tally/runtime/object_meta.hpp"
#include "tally/common/proto_wire.hpp"
#include "tally/runtime/watch_event.hpp"

namespace tally::runtime {

class ProtobufFramer {
 public:
  explicit ProtobufFramer(size_t maxFrameBytes = 64u << 20) : maxFrame_(maxFrameBytes) {}
  // Views returned by next() stay valid until the next append().
  void append(std::string_view bytes);
  // The next complete frame, or an empty view when more bytes are needed.
  // A declared length above the limit is an error.
  Result<std::string_view> next();
  // Bytes left over at the end of the stream are a truncated frame.
  Status finish() const;
  void reset() {
    buf_.clear();
    head_ = 0;
  }
  bool empty() const { return head_ == buf_.size(); }
  // Bytes still needed to complete the buffered frame (at least 1 while
  // the length prefix is incomplete).
  size_t missing() const {
    const size_t avail = buf_.size() - head_;
    if (avail < 4) return 4 - avail;
    const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + head_);
    const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    return len + 4 > avail ? len + 4 - avail : 0;
  }

 private:
  std::string buf_;
  size_t head_ = 0;
  size_t maxFrame_;
};

namespace detail {

struct RawWatchEvent {
  std::string_view type;
  std::string_view object;  // typed object bytes inside runtime.Unknown
};

Result<RawWatchEvent> splitWatchEvent(std::string_view frame);
Status decodeBookmarkProtobuf(std::string_view raw, std::string& rv, bool& initialEventsEnd);

}  // namespace detail

// Decodes one frame into `ev`, a fresh event.
template <ProtobufCodec C>
Status decodeProtobufEvent(std::string_view frame, WatchEvent<typename C::Object>& ev) {
  auto raw = detail::splitWatchEvent(frame);
  if (!raw) return std::move(raw).error();
  auto type = parseEventType(raw->type);
  if (!type) return Error(ErrorCode::kDecode, "unknown watch event type " + std::string(raw->type.substr(0, 32)));
  ev.type = *type;
  switch (ev.type) {
    case EventType::kBookmark:
      return detail::decodeBookmarkProtobuf(raw->object, ev.resourceVersion, ev.initialEventsEnd);
    case EventType::kError: {
      auto st = parseStatusProtobuf(raw->object);
      if (!st) return std::move(st).error();
      ev.status = std::move(*st);
      return {};
    }
    default:
      if constexpr (ProtobufIntoCodec<C>) {
        return C::fromProtobuf(raw->object, ev.object.emplace());
      } else {
        auto obj = C::fromProtobuf(raw->object);
        if (!obj) return std::move(obj).error();
        ev.object.emplace(std::move(*obj));
        return {};
      }
  }
}

template <ProtobufCodec C>
Result<WatchEvent<typename C::Object>> decodeProtobufEvent(std::string_view frame) {
  WatchEvent<typename C::Object> ev;
  if (auto st = decodeProtobufEvent<C>(frame, ev); !st) return std::move(st).error();
  return ev;
}

template <ProtobufCodec C>
class ProtobufWatchDecoder {
 public:
  using Event = WatchEvent<typename C::Object>;

  template <class Sink>
  Status feed(std::string_view bytes, Sink&& sink) {
    // Frames wholly inside `bytes` are decoded in place; only a partial
    // frame at either end goes through the framer's buffer.
    while (!framer_.empty() && !bytes.empty()) {
      const size_t take = std::min(std::max<size_t>(framer_.missing(), 1), bytes.size());
      framer_.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
      if (auto st = drain(sink); !st) return st;
    }
    if (!framer_.empty()) return {};
    while (bytes.size() >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
      const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
      if (len == 0 || len > kMaxFrame || bytes.size() - 4 < len) break;
      prefetchNextFrame(bytes, 4 + len);
      if (auto st = decodeInto(bytes.substr(4, len), sink); !st) return st;
      bytes.remove_prefix(4 + len);
    }
    if (bytes.empty()) return {};
    framer_.append(bytes);
    return drain(sink);
  }
  template <class Sink>
  Status finish(Sink&&) {
    return framer_.finish();
  }
  void reset() { framer_.reset(); }

 private:
  static constexpr size_t kMaxFrame = 64u << 20;

  // Decoding skips most of a frame by length (managedFields, env, probes), so
  // its reads land on cache lines the hardware prefetcher did not see coming,
  // each a stall. Asking for the next frame's lines (its length is a guess:
  // the current frame's) while this one decodes hides that latency; a hint
  // only, never a read, so a wrong guess costs nothing but bandwidth.
  static void prefetchNextFrame(std::string_view bytes, size_t next) {
    const size_t ahead = std::min(bytes.size(), 2 * next);
    for (size_t at = next; at < ahead; at += 64) prefetchLine(bytes.data() + at);
  }
  // A loop of nothing but __builtin_prefetch has no side effects as far as GCC
  // is concerned, and with -ffinite-loops (the C++ default at -O2) it deletes
  // the loop once inlined: the prefetch above was silently absent from the
  // build, and the decoder stalled on every skipped-to line of a stream larger
  // than the cache. A volatile asm statement cannot be deleted.
  static void prefetchLine(const char* line) {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetcht0 %0" : : "m"(*line));
#else
    __builtin_prefetch(line);
    asm volatile("" : : "r"(line));
#endif
  }

  template <class Sink>
  Status drain(Sink& sink) {
    for (;;) {
      auto frame = framer_.next();
      if (!frame) return std::move(frame).error();
      if (frame->empty()) return {};
      if (auto st = decodeInto(*frame, sink); !st) return st;
    }
  }

  // The event is made here and decoded in place, so the object reaches the
  // sink without being moved on the way.
  template <class Sink>
  static Status decodeInto(std::string_view frame, Sink& sink) {
    Event ev;
    if (auto st = decodeProtobufEvent<C>(frame, ev); !st) return st;
    sink(std::move(ev));
    return {};
  }

  ProtobufFramer framer_{kMaxFrame};
};

// A protobuf LIST body: envelope whose raw is a *List{metadata = 1 ListMeta, items = 2}.
template <ProtobufCodec C>
Result<ListPage<typename C::Object>> decodeProtobufList(std::string_view body) {
  proto::Unknown env;
  if (!proto::parseEnvelope(body, env)) return Error(ErrorCode::kDecode, "list: not a protobuf envelope");
  ListPage<typename C::Object> page;
  proto::Reader r(env.raw);
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) {
      proto::Reader m(r.bytes());
      while (m.next()) {
        if (m.field() == 2 && m.isBytes()) page.resourceVersion.assign(m.bytes());
        if (m.field() == 3 && m.isBytes()) page.continueToken.assign(m.bytes());
      }
      if (m.failed()) return Error(ErrorCode::kDecode, "list: malformed ListMeta");
    } else if (r.field() == 2) {
      auto item = C::fromProtobuf(r.bytes());
      if (!item) return std::move(item).error().withContext("list item");
      page.items.push_back(std::move(*item));
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "list: malformed message");
  return page;
}

template <ProtobufCodec C>
Result<typename C::Object> decodeProtobufObject(std::string_view body) {
  proto::Unknown env;
  if (!proto::parseEnvelope(body, env)) return Error(ErrorCode::kDecode, "object: not a protobuf envelope");
  return C::fromProtobuf(env.raw);
}

}  // namespace tally::runtime
