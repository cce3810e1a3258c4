#include "tally/runtime/protobuf_watch.hpp"

namespace tally::runtime {

void ProtobufFramer::append(std::string_view bytes) {
  if (head_ > 0 && (head_ == buf_.size() || head_ >= (64u << 10))) {
    buf_.erase(0, head_);
    head_ = 0;
  }
  buf_.append(bytes);
}

Result<std::string_view> ProtobufFramer::next() {
  const size_t avail = buf_.size() - head_;
  if (avail < 4) return std::string_view();
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + head_);
  const uint32_t len = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
  if (len > maxFrame_)
    return Error(ErrorCode::kDecode, "watch frame of " + std::to_string(len) + " bytes exceeds the limit");
  if (len == 0) return Error(ErrorCode::kDecode, "empty watch frame");
  if (avail - 4 < len) return std::string_view();
  std::string_view frame(buf_.data() + head_ + 4, len);
  head_ += 4 + len;
  return frame;
}

Status ProtobufFramer::finish() const {
  if (head_ != buf_.size()) return Error(ErrorCode::kDecode, "watch stream ended inside a frame");
  return {};
}

namespace detail {

Result<RawWatchEvent> splitWatchEvent(std::string_view frame) {
  RawWatchEvent out;
  std::string_view rawExt;
  bool haveType = false;
  bool haveObject = false;
  proto::Reader r(frame);
  while (r.next()) {
    if (!r.isBytes()) continue;
    if (r.field() == 1) {
      out.type = r.bytes();
      haveType = true;
    } else if (r.field() == 2) {
      proto::Reader ext(r.bytes());  // RawExtension{raw = 1}
      while (ext.next()) {
        if (ext.field() == 1 && ext.isBytes()) rawExt = ext.bytes();
      }
      if (ext.failed()) return Error(ErrorCode::kDecode, "watch event: malformed RawExtension");
      haveObject = true;
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "watch event: malformed WatchEvent");
  if (!haveType || !haveObject) return Error(ErrorCode::kDecode, "watch event without type or object");
  proto::Unknown env;
  if (!proto::parseEnvelope(rawExt, env)) return Error(ErrorCode::kDecode, "watch event: object is not a k8s envelope");
  out.object = env.raw;
  return out;
}

Status decodeBookmarkProtobuf(std::string_view raw, std::string& rv, bool& initialEventsEnd) {
  proto::Reader r(raw);
  while (r.next()) {
    if (r.field() == 1 && r.isBytes()) {
      ObjectMeta meta;
      if (auto st = decodeObjectMetaProtobuf(r.bytes(), meta, kMetaAnnotations); !st) return metaError(st.error());
      rv = std::move(meta.resourceVersion);
      const std::string* mark = meta.annotation(kInitialEventsEndAnnotation);
      initialEventsEnd = mark && *mark == "true";
    }
  }
  if (r.failed()) return Error(ErrorCode::kDecode, "bookmark: malformed object");
  return {};
}

}  // namespace detail
}  // namespace tally::runtime
