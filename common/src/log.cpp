#include "tally/common/log.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <ostream>

#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally {
namespace {

std::atomic<int> gFormat{static_cast<int>(LogFormat::kJson)};
std::mutex gSinkMu;
LogSink gSink;  // empty: stderr

// Shortest round-trip digits; JSON has no NaN or infinity, so those are null.
void appendNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

// logfmt leaves a value bare unless a reader could not tell where it ends.
bool needsTextQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (char c : s) {
    if (c == ' ' || c == '=' || c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void appendValue(std::string& line, LogFormat format, const LogField::Value& value) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string_view>) {
          if (format == LogFormat::kJson || needsTextQuotes(v)) {
            appendJsonString(line, v);
          } else {
            line += v;
          }
        } else if constexpr (std::is_same_v<T, bool>) {
          line += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          appendNumber(line, v);
        } else {
          line += std::to_string(v);
        }
      },
      value);
}

void appendPair(std::string& line, LogFormat format, std::string_view key, const LogField::Value& value) {
  if (format == LogFormat::kJson) {
    line += line.empty() ? '{' : ',';
    appendJsonString(line, key);
    line += ':';
  } else {
    if (!line.empty()) line += ' ';
    line += key;
    line += '=';
  }
  appendValue(line, format, value);
}

}  // namespace

std::string_view toString(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

std::string_view toString(LogFormat format) { return format == LogFormat::kText ? "text" : "json"; }

Expected<LogLevel, LogSettingError> parseLogLevel(std::string_view text) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (toString(l) == text) return l;
  }
  return LogSettingError{"log level \"" + std::string(text) + "\" is not one of debug, info, warning, error"};
}

Expected<LogFormat, LogSettingError> parseLogFormat(std::string_view text) {
  for (LogFormat f : {LogFormat::kJson, LogFormat::kText}) {
    if (toString(f) == text) return f;
  }
  return LogSettingError{"log format \"" + std::string(text) + "\" is not one of json, text"};
}

void setLogLevel(LogLevel lowestWritten) { detail::gLowestLogLevel.store(static_cast<int>(lowestWritten)); }

void setLogFormat(LogFormat format) { gFormat.store(static_cast<int>(format)); }

void setLogSink(LogSink sink) {
  std::lock_guard lock(gSinkMu);
  gSink = std::move(sink);
}

void setLogStream(std::ostream* out) {
  if (!out) return setLogSink(nullptr);
  setLogSink([out](LogLevel, std::string_view line) {
    out->write(line.data(), static_cast<std::streamsize>(line.size()));
    out->put('\n');
    out->flush();
  });
}

std::string formatLogLine(LogFormat format, std::int64_t unixMillis, LogLevel level, std::string_view message,
                          LogFields fields) {
  const std::string ts =
      formatRfc3339(toUnixTime(std::chrono::system_clock::time_point(std::chrono::milliseconds(unixMillis))), 3);
  std::string line;
  line.reserve(64 + message.size() + 24 * fields.size());
  appendPair(line, format, "ts", std::string_view(ts));
  appendPair(line, format, "level", toString(level));
  appendPair(line, format, "msg", message);
  for (const LogField& f : fields) appendPair(line, format, f.key, f.value);
  if (format == LogFormat::kJson) line += '}';
  return line;
}

namespace detail {

void writeLog(LogLevel level, std::string_view message, LogFields fields) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string line =
      formatLogLine(static_cast<LogFormat>(gFormat.load(std::memory_order_relaxed)),
                    std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), level, message, fields);
  std::lock_guard lock(gSinkMu);
  if (gSink) {
    gSink(level, line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace detail
}  // namespace tally
