#include "tally/observability/log.hpp"

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <mutex>

#include "tally/common/json.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::observability {
namespace {

std::atomic<int> gLevel{static_cast<int>(Level::Info)};
std::mutex gMu;
std::ostream* gOut = nullptr;

// Shortest round-trip digits; JSON has no NaN or infinity, so those are null.
void appendJsonNumber(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, res.ptr);
}

}  // namespace

std::string_view toString(Level level) {
  switch (level) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warning: return "warning";
    case Level::Error: return "error";
  }
  return "info";
}

Expected<Level, LevelParseError> parseLevel(std::string_view text) {
  for (Level l : {Level::Debug, Level::Info, Level::Warning, Level::Error}) {
    if (toString(l) == text) return l;
  }
  return LevelParseError{"unknown level " + std::string(text)};
}

void setLogLevel(Level level) { gLevel.store(static_cast<int>(level)); }

void setLogStream(std::ostream* out) {
  std::lock_guard lock(gMu);
  gOut = out;
}

std::string formatLogLine(std::int64_t unixMillis, Level level, std::string_view message,
                          std::initializer_list<Field> fields) {
  const std::string ts =
      formatRfc3339(toUnixTime(std::chrono::system_clock::time_point(std::chrono::milliseconds(unixMillis))), 3);
  std::string line = "{\"ts\":\"";
  line += ts;
  line += "\",\"level\":\"";
  line += toString(level);
  line += "\",\"msg\":";
  appendJsonString(line, message);
  for (const Field& f : fields) {
    line += ',';
    appendJsonString(line, f.key);
    line += ':';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string_view>)
            appendJsonString(line, v);
          else if constexpr (std::is_same_v<T, bool>)
            line += v ? "true" : "false";
          else if constexpr (std::is_same_v<T, double>) {
            appendJsonNumber(line, v);
          } else
            line += std::to_string(v);
        },
        f.value);
  }
  line += '}';
  return line;
}

void log(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (static_cast<int>(level) < gLevel.load(std::memory_order_relaxed)) return;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::string line =
      formatLogLine(std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), level, message, fields);
  line += '\n';
  std::lock_guard lock(gMu);
  std::ostream& out = gOut ? *gOut : std::cerr;
  out << line;
  out.flush();
}

}  // namespace tally::observability
