#pragma once
// JSON watch streams: the API server writes one event object per line;
// network reads split and join them arbitrarily. JsonFramer reassembles
// complete lines in a buffer that keeps simdjson's padding available, and
// the decoders walk each line once with simdjson on-demand into the codec's
// value type.

#include <simdjson.h>

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "tally/runtime/codec.hpp"
#include "tally/runtime/object_meta.hpp"
#include "tally/runtime/watch_event.hpp"

namespace tally::runtime {

class JsonFramer {
 public:
  explicit JsonFramer(size_t maxFrameBytes = 64u << 20) : maxFrame_(maxFrameBytes) {}

  // Views returned by next() stay valid until the next append().
  void append(std::string_view bytes);
  // The next complete event, or an empty view when more bytes are needed.
  Result<simdjson::padded_string_view> next();
  // At the end of the stream: a final unterminated event, if any.
  Result<simdjson::padded_string_view> finish();
  size_t buffered() const { return buf_.size() - head_; }
  void reset() {
    buf_.clear();
    head_ = scan_ = 0;
  }

 private:
  simdjson::padded_string_view view(size_t begin, size_t end) const;

  std::string buf_;
  size_t head_ = 0;  // first unconsumed byte
  size_t scan_ = 0;  // bytes before this hold no newline
  size_t maxFrame_;
};

namespace detail {

// True when nothing but whitespace follows the top-level value.
inline bool documentConsumed(simdjson::ondemand::document& doc) {
  const char* loc = nullptr;
  return doc.current_location().get(loc) == simdjson::OUT_OF_BOUNDS;
}

// Metadata of a bookmark: its resourceVersion and the initial-events-end mark.
Status decodeBookmarkJson(simdjson::ondemand::value v, std::string& rv, bool& initialEventsEnd);
Status decodeStatusJson(simdjson::ondemand::value v, ApiStatus& out);
Status decodeListMetaJson(simdjson::ondemand::value v, std::string& rv, std::string& cont);

template <JsonCodec C>
Status decodeEventObject(EventType type, simdjson::ondemand::value v, WatchEvent<typename C::Object>& ev) {
  switch (type) {
    case EventType::kBookmark: return decodeBookmarkJson(v, ev.resourceVersion, ev.initialEventsEnd);
    case EventType::kError: return decodeStatusJson(v, ev.status);
    default: {
      auto obj = C::fromJson(v);
      if (!obj) return std::move(obj).error();
      ev.object.emplace(std::move(*obj));
      return {};
    }
  }
}

// Calls f(value) on the one JSON value of `text`, read inside "[...]" so that
// it is a nested value: simdjson reads a document's root value apart (its
// scalar reads, is_null() among them, are for nested values: at the root they
// assert, or are undefined under NDEBUG), and codecs read the values of events
// and list items, never roots.
template <class F>
Status withNestedValue(simdjson::ondemand::parser& parser, std::string_view text, std::string_view what, F&& f) {
  namespace od = simdjson::ondemand;
  simdjson::padded_string padded(text.size() + 2);
  padded.data()[0] = '[';
  std::copy(text.begin(), text.end(), padded.data() + 1);
  padded.data()[text.size() + 1] = ']';
  od::document doc;
  if (auto e = parser.iterate(padded).get(doc)) return jsonError(e, what);
  od::array array;
  if (auto e = doc.get_array().get(array)) return jsonError(e, what);
  for (auto element : array) {
    od::value v;
    if (auto e = std::move(element).get(v)) return jsonError(e, what);
    return f(v);
  }
  return Error(ErrorCode::kDecode, std::string(what) + ": empty");
}

}  // namespace detail

// Decodes one watch event line. Never keeps the document.
template <JsonCodec C>
Result<WatchEvent<typename C::Object>> decodeJsonEvent(simdjson::ondemand::parser& parser,
                                                       simdjson::padded_string_view frame) {
  namespace od = simdjson::ondemand;
  WatchEvent<typename C::Object> ev;
  od::document doc;
  if (auto e = parser.iterate(frame).get(doc)) return jsonError(e, "watch event");
  od::object obj;
  if (auto e = doc.get_object().get(obj)) return jsonError(e, "watch event");
  bool haveType = false;
  bool haveObject = false;
  std::string deferred;  // the object, when it came before "type"
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "watch event");
    if (key == "type") {
      std::string_view t;
      if (auto e = field.value().get_string().get(t)) return jsonError(e, "watch event type");
      auto parsed = parseEventType(t);
      if (!parsed) return std::move(parsed).error();
      ev.type = *parsed;
      haveType = true;
    } else if (key == "object") {
      od::value v;
      if (auto e = field.value().get(v)) return jsonError(e, "watch event object");
      haveObject = true;
      if (!haveType) {
        od::object o;
        std::string_view raw;
        if (auto e = v.get_object().get(o)) return jsonError(e, "watch event object");
        if (auto e = o.raw_json().get(raw)) return jsonError(e, "watch event object");
        deferred.assign(raw);
        continue;
      }
      if (auto st = detail::decodeEventObject<C>(ev.type, v, ev); !st) return std::move(st).error();
    }
  }
  if (!detail::documentConsumed(doc)) return Error(ErrorCode::kDecode, "watch event: trailing bytes after the event");
  if (!haveType || !haveObject) return Error(ErrorCode::kDecode, "watch event without type or object");
  if (!deferred.empty()) {
    od::parser second;
    auto st = detail::withNestedValue(second, deferred, "watch event object",
                                      [&](od::value v) { return detail::decodeEventObject<C>(ev.type, v, ev); });
    if (!st) return std::move(st).error();
  }
  return ev;
}

// Feeds network bytes and hands each decoded event to `sink`; the first
// malformed event stops the stream with an error (the caller restarts the watch).
template <JsonCodec C>
class JsonWatchDecoder {
 public:
  using Event = WatchEvent<typename C::Object>;

  template <class Sink>
  Status feed(std::string_view bytes, Sink&& sink) {
    framer_.append(bytes);
    return drain(sink, false);
  }
  template <class Sink>
  Status finish(Sink&& sink) {
    return drain(sink, true);
  }
  void reset() { framer_.reset(); }

 private:
  template <class Sink>
  Status drain(Sink& sink, bool atEnd) {
    for (;;) {
      auto frame = atEnd ? framer_.finish() : framer_.next();
      if (!frame) return std::move(frame).error();
      if (frame->length() == 0) return {};
      auto ev = decodeJsonEvent<C>(parser_, *frame);
      if (!ev) return std::move(ev).error();
      sink(std::move(*ev));
      if (atEnd) return {};
    }
  }

  JsonFramer framer_;
  simdjson::ondemand::parser parser_;
};

// Decodes a LIST response body ({"metadata":{...},"items":[...]}).
template <JsonCodec C>
Result<ListPage<typename C::Object>> decodeJsonList(simdjson::ondemand::parser& parser, std::string_view body) {
  namespace od = simdjson::ondemand;
  simdjson::padded_string padded(body);
  od::document doc;
  if (auto e = parser.iterate(padded).get(doc)) return jsonError(e, "list");
  od::object obj;
  if (auto e = doc.get_object().get(obj)) return jsonError(e, "list");
  ListPage<typename C::Object> page;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "list");
    od::value v;
    if (auto e = field.value().get(v)) return jsonError(e, "list");
    if (key == "metadata") {
      if (auto st = detail::decodeListMetaJson(v, page.resourceVersion, page.continueToken); !st) {
        return std::move(st).error();
      }
    } else if (key == "items") {
      bool isNull = false;
      if (!v.is_null().get(isNull) && isNull) continue;
      od::array arr;
      if (auto e = v.get_array().get(arr)) return jsonError(e, "list items");
      for (auto item : arr) {
        od::value iv;
        if (auto e = item.get(iv)) return jsonError(e, "list item");
        auto decoded = C::fromJson(iv);
        if (!decoded) return std::move(decoded).error().withContext("list item");
        page.items.push_back(std::move(*decoded));
      }
    }
  }
  if (!detail::documentConsumed(doc)) return Error(ErrorCode::kDecode, "list: trailing bytes");
  return page;
}

// The same with a parser of its own (one LIST page at a time, as a caller
// paging through a collection reads them).
template <JsonCodec C>
Result<ListPage<typename C::Object>> decodeJsonList(std::string_view body) {
  simdjson::ondemand::parser parser;
  return decodeJsonList<C>(parser, body);
}

// Decodes a single object body (GET/PUT/PATCH responses).
template <JsonCodec C>
Result<typename C::Object> decodeJsonObject(std::string_view body) {
  simdjson::ondemand::parser parser;
  std::optional<typename C::Object> object;
  auto st = detail::withNestedValue(parser, body, "object", [&](simdjson::ondemand::value v) -> Status {
    auto decoded = C::fromJson(v);
    if (!decoded) return std::move(decoded).error();
    object.emplace(std::move(*decoded));
    return {};
  });
  if (!st) return std::move(st).error();
  return std::move(*object);
}

}  // namespace tally::runtime
