#include "tally/runtime/json_watch.hpp"

#include <cstring>

namespace tally::runtime {

Result<EventType> parseEventType(std::string_view s) {
  if (s == "ADDED") return EventType::kAdded;
  if (s == "MODIFIED") return EventType::kModified;
  if (s == "DELETED") return EventType::kDeleted;
  if (s == "BOOKMARK") return EventType::kBookmark;
  if (s == "ERROR") return EventType::kError;
  return Error(ErrorCode::kDecode, "unknown watch event type " + std::string(s.substr(0, 32)));
}

std::string_view eventTypeName(EventType t) {
  switch (t) {
    case EventType::kAdded: return "ADDED";
    case EventType::kModified: return "MODIFIED";
    case EventType::kDeleted: return "DELETED";
    case EventType::kBookmark: return "BOOKMARK";
    case EventType::kError: return "ERROR";
  }
  return "?";
}

void JsonFramer::append(std::string_view bytes) {
  if (head_ > 0 && (head_ == buf_.size() || head_ >= (64u << 10))) {
    buf_.erase(0, head_);
    scan_ -= head_;
    head_ = 0;
  }
  buf_.append(bytes);
  buf_.reserve(buf_.size() + simdjson::SIMDJSON_PADDING);
}

simdjson::padded_string_view JsonFramer::view(size_t begin, size_t end) const {
  return simdjson::padded_string_view(buf_.data() + begin, end - begin, buf_.capacity() - begin);
}

Result<simdjson::padded_string_view> JsonFramer::next() {
  for (;;) {
    const char* base = buf_.data();
    const void* nl = scan_ < buf_.size() ? std::memchr(base + scan_, '\n', buf_.size() - scan_) : nullptr;
    if (!nl) {
      scan_ = buf_.size();
      if (buffered() > maxFrame_) {
        return Error(ErrorCode::kDecode, "watch event larger than " + std::to_string(maxFrame_) + " bytes");
      }
      return simdjson::padded_string_view();
    }
    const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - base);
    size_t begin = head_;
    head_ = scan_ = end + 1;
    while (begin < end && (base[begin] == ' ' || base[begin] == '\r' || base[begin] == '\t')) ++begin;
    if (begin == end) continue;  // blank line
    return view(begin, end);
  }
}

Result<simdjson::padded_string_view> JsonFramer::finish() {
  auto line = next();
  if (!line || line->length() > 0) return line;
  size_t begin = head_;
  while (begin < buf_.size() && std::isspace(static_cast<unsigned char>(buf_[begin]))) ++begin;
  head_ = scan_ = buf_.size();
  if (begin == buf_.size()) return simdjson::padded_string_view();
  return view(begin, buf_.size());
}

namespace detail {

Status decodeBookmarkJson(simdjson::ondemand::value v, std::string& rv, bool& initialEventsEnd) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "bookmark");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "bookmark");
    if (key != "metadata") continue;
    simdjson::ondemand::value mv;
    if (auto e = field.value().get(mv)) return jsonError(e, "bookmark");
    ObjectMeta meta;
    if (auto st = decodeObjectMetaJson(mv, meta, kMetaAnnotations); !st) return metaError(st.error());
    rv = std::move(meta.resourceVersion);
    const std::string* mark = meta.annotation(kInitialEventsEndAnnotation);
    initialEventsEnd = mark && *mark == "true";
  }
  return {};
}

Status decodeStatusJson(simdjson::ondemand::value v, ApiStatus& out) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "status");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "status");
    simdjson::ondemand::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "status");
    if (key == "code") {
      int64_t c = 0;
      if (auto e = fv.get_int64().get(c)) return jsonError(e, "status.code");
      out.code = static_cast<int>(c);
    } else if (key == "reason") {
      if (auto st = jsonStringInto(fv, out.reason, "status.reason"); !st) return st;
    } else if (key == "message") {
      if (auto st = jsonStringInto(fv, out.message, "status.message"); !st) return st;
    }
  }
  return {};
}

Status decodeListMetaJson(simdjson::ondemand::value v, std::string& rv, std::string& cont) {
  simdjson::ondemand::object obj;
  if (auto e = v.get_object().get(obj)) return jsonError(e, "list metadata");
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return jsonError(e, "list metadata");
    simdjson::ondemand::value fv;
    if (auto e = field.value().get(fv)) return jsonError(e, "list metadata");
    if (key == "resourceVersion") {
      if (auto st = jsonStringInto(fv, rv, "list resourceVersion"); !st) return st;
    } else if (key == "continue") {
      if (auto st = jsonStringInto(fv, cont, "list continue"); !st) return st;
    }
  }
  return {};
}

}  // namespace detail
}  // namespace tally::runtime
