#pragma once
// The process's structured log, shared by the runtime, the libraries and both
// binaries: a message with key/value fields at one of four levels, one line per
// entry, written whole. Safe to call from any thread; a level that is off costs
// one relaxed atomic load (the fields are string views, never formatted).
//
// JSON (the default), one object per line:
//   {"ts":"2026-01-02T03:04:05.678Z","level":"warning","msg":"bind refused","pod":"ns/a","units":2}
// Text (logfmt), one line of key=value pairs:
//   ts=2026-01-02T03:04:05.678Z level=warning msg="bind refused" pod=ns/a units=2
// ts is RFC 3339 in UTC with milliseconds; level is debug, info, warning or
// error; fields follow in the order given, keys as written. Strings are JSON
// escaped (so a line never breaks); in text a value is quoted only when it is
// empty or holds a space, '=', '"', '\\' or a control character. Numbers are
// written as numbers (doubles shortest round-trip, NaN and infinities as
// null), booleans as true/false.

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "tally/common/expected.hpp"

namespace tally {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kJson, kText };

// "debug" | "info" | "warning" | "error"; "json" | "text".
std::string_view toString(LogLevel level);
std::string_view toString(LogFormat format);

// Why a --log-level or --log-format value was refused, quoting it and the choices.
struct LogSettingError {
  std::string message;
  const std::string& describe() const { return message; }
};
Expected<LogLevel, LogSettingError> parseLogLevel(std::string_view text);
Expected<LogFormat, LogSettingError> parseLogFormat(std::string_view text);

// One key/value of an entry. Holds views: valid for the call that logs it.
struct LogField {
  using Value = std::variant<std::string_view, std::int64_t, double, bool>;
  std::string_view key;
  Value value;
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  LogField(std::string_view k, double v) : key(k), value(v) {}
  template <class I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) LogField(std::string_view k, I v)
      : key(k), value(static_cast<std::int64_t>(v)) {}
};
using LogFields = std::initializer_list<LogField>;

// Receives each formatted line (no newline) with its level; called under the
// logger's lock, one line at a time.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Process-wide settings; each may change while other threads log.
void setLogLevel(LogLevel lowestWritten);  // default info
void setLogFormat(LogFormat format);       // default JSON
void setLogSink(LogSink sink);             // default (and nullptr): stderr
void setLogStream(std::ostream* out);      // a sink writing lines to out; nullptr: stderr

namespace detail {
inline std::atomic<int> gLowestLogLevel{static_cast<int>(LogLevel::kInfo)};
void writeLog(LogLevel level, std::string_view message, LogFields fields);
}  // namespace detail

inline bool logEnabled(LogLevel level) {
  return static_cast<int>(level) >= detail::gLowestLogLevel.load(std::memory_order_relaxed);
}

inline void log(LogLevel level, std::string_view message, LogFields fields = {}) {
  if (logEnabled(level)) detail::writeLog(level, message, fields);
}
inline void logDebug(std::string_view message, LogFields fields = {}) { log(LogLevel::kDebug, message, fields); }
inline void logInfo(std::string_view message, LogFields fields = {}) { log(LogLevel::kInfo, message, fields); }
inline void logWarning(std::string_view message, LogFields fields = {}) { log(LogLevel::kWarning, message, fields); }
inline void logError(std::string_view message, LogFields fields = {}) { log(LogLevel::kError, message, fields); }

// The line an entry is written as, without the newline (pure: for tests).
std::string formatLogLine(LogFormat format, std::int64_t unixMillis, LogLevel level, std::string_view message,
                          LogFields fields);

}  // namespace tally
