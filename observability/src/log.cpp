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

bool parseLevel(std::string_view text, Level& out) {
  for (Level l : {Level::Debug, Level::Info, Level::Warning, Level::Error}) {
    if (toString(l) == text) {
      out = l;
      return true;
    }
  }
  return false;
}

void setLogLevel(Level level) { gLevel.store(static_cast<int>(level)); }

void setLogStream(std::ostream* out) {
  std::lock_guard lock(gMu);
  gOut = out;
}

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  // Runs of characters that need no escape are appended whole; eight bytes are
  // checked at a time.
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    while (i + 8 <= s.size()) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if (detail::jsonSpecialBytes(w)) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (!detail::isJsonSpecial(c)) continue;
    out.append(s.data() + start, i - start);
    start = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
    }
  }
  out.append(s.data() + start, s.size() - start);
  out += '"';
}

std::string formatLogLine(std::int64_t unixMillis, Level level, std::string_view message,
                          std::initializer_list<Field> fields) {
  std::time_t secs = static_cast<std::time_t>(unixMillis / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[96];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unixMillis % 1000));
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
          if constexpr (std::is_same_v<T, std::string_view>) appendJsonString(line, v);
          else if constexpr (std::is_same_v<T, bool>) line += v ? "true" : "false";
          else if constexpr (std::is_same_v<T, double>) {
            appendJsonNumber(line, v);
          } else line += std::to_string(v);
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
