#pragma once
// Structured logs: one JSON object per line on a stream (stderr by default),
// {"ts":"2026-01-02T03:04:05.678Z","level":"info","msg":"...", <fields>}.
// Safe to call from any thread; a line is written whole.

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <variant>

#include "tally/common/expected.hpp"

namespace tally::observability {

enum class Level { Debug, Info, Warning, Error };
std::string_view toString(Level level);
// Why a level name was refused, quoting it.
struct LevelParseError {
  std::string message;
  const std::string& describe() const { return message; }
};
// "debug" | "info" | "warning" | "error".
Expected<Level, LevelParseError> parseLevel(std::string_view text);

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
  requires std::is_integral_v<I> Field(std::string_view k, I v) : key(k), value(static_cast<std::int64_t>(v)) {}
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

}  // namespace tally::observability
