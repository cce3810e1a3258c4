#pragma once
// JSON output: the one string escaper and the one streaming writer behind the
// client's request bodies, the structured logs, tallyctl's reports and the
// extender's answers. A string literal escapes '"', '\\', \n, \r and \t by
// name and every other control character as \u00xx; all other bytes (UTF-8
// included) are copied as they are.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tally {

namespace detail {
// Bytes a JSON string literal must escape: control characters, '"' and '\\'.
inline bool isJsonSpecial(unsigned char c) { return c < 0x20 || c == '"' || c == '\\'; }
// Non-zero when one of the eight bytes of w may be such a byte (a flag can
// also fall on a byte after a real one; callers then look byte by byte).
inline std::uint64_t jsonSpecialBytes(std::uint64_t w) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
  auto hasZeroByte = [](std::uint64_t x) { return (x - kOnes) & ~x & kHighs; };
  return ((w - 0x20 * kOnes) & ~w & kHighs) | hasZeroByte(w ^ ('"' * kOnes)) | hasZeroByte(w ^ ('\\' * kOnes));
}
}  // namespace detail

// Whether s holds a byte the escaper rewrites: without one, '"' + s + '"' is
// already the literal. Inline: the extender asks it of every node name of a
// request.
inline bool needsJsonEscape(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (detail::jsonSpecialBytes(w)) break;
  }
  for (; i < s.size(); ++i) {
    if (detail::isJsonSpecial(static_cast<unsigned char>(s[i]))) return true;
  }
  return false;
}

// Appends s escaped for the inside of a JSON string literal (no quotes).
void appendJsonEscaped(std::string& out, std::string_view s);
// Appends s as a JSON string literal, quotes included.
void appendJsonString(std::string& out, std::string_view s);
// s as a JSON string literal, quotes included.
std::string jsonString(std::string_view s);
// s as one reference token of a JSON Pointer (RFC 6901): '~' as "~0", '/' as "~1".
std::string jsonPointerToken(std::string_view s);

// `text` cut to at most `maxBytes` (>= 4) for a field the API server limits
// (an Event's message, a condition's): "..." marks the cut, which falls on a
// UTF-8 character boundary so the result stays valid text.
std::string truncatedText(std::string text, std::size_t maxBytes);

// A streaming writer: keys in the order written, strings escaped, commas
// between elements. The caller balances begin and end.
class JsonWriter {
 public:
  JsonWriter& beginObject();
  JsonWriter& endObject();
  JsonWriter& beginArray();
  JsonWriter& endArray();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(std::int64_t number);
  JsonWriter& value(bool flag);
  template <class T>
  JsonWriter& field(std::string_view name, const T& v) {
    key(name);
    return value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool afterKey_ = false;
};

}  // namespace tally
