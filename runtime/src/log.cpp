#include "tally/runtime/log.hpp"

#include <cstdio>
#include <string>

namespace tally::runtime {
namespace {

void stderrSink(LogLevel level, std::string_view message) {
  if (level < LogLevel::kWarning) return;
  const char* tag = level == LogLevel::kError ? "E" : "W";
  std::fprintf(stderr, "%s tally-runtime: %.*s\n", tag, static_cast<int>(message.size()), message.data());
}

LogSink& sink() {
  static LogSink s = stderrSink;
  return s;
}

}  // namespace

void setLogSink(LogSink s) { sink() = s ? std::move(s) : LogSink(stderrSink); }

void log(LogLevel level, std::string_view message) { sink()(level, message); }

}  // namespace tally::runtime
