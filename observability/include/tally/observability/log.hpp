#pragma once
// Structured logs: one JSON object per line on a stream (stderr by default),
// {"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"...", <fields>}.
// Safe to call from any thread; a line is written whole.

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>

namespace tally::observability {

enum class Level { Debug, Info, Warning, Error };
std::string_view toString(Level level);
// "debug" | "info" | "warning" | "error"; false when unknown.
bool parseLevel(std::string_view text, Level& out);

using FieldValue = std::variant<std::string_view, std::int64_t, double, bool>;
struct Field {
  std::string_view key;
  FieldValue value;
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  Field(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  Field(std::string_view k, bool v) : key(k), value(v) {}
  Field(std::string_view k, double v) : key(k), value(v) {}
  template <class I>
    requires std::is_integral_v<I>
  Field(std::string_view k, I v) : key(k), value(static_cast<std::int64_t>(v)) {}
};

// Process-wide settings: lowest level written and the destination.
void setLogLevel(Level level);
void setLogStream(std::ostream* out);  // nullptr: stderr

void log(Level level, std::string_view message, std::initializer_list<Field> fields = {});
inline void logInfo(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::Info, m, f); }
inline void logWarning(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::Warning, m, f); }
inline void logError(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::Error, m, f); }
inline void logDebug(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::Debug, m, f); }

// The line log() writes, without the newline (for tests).
std::string formatLogLine(std::int64_t unixMillis, Level level, std::string_view message,
                          std::initializer_list<Field> fields);

// Appends s as a JSON string literal (quotes included).
void appendJsonString(std::string& out, std::string_view s);
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

// Whether s holds a byte appendJsonString would escape (a control character,
// '"' or '\\'): without one, '"' + s + '"' is already the literal. Inline:
// the extender asks it of every node name of a request.
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

}  // namespace tally::observability
