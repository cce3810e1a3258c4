#pragma once
// A minimal pluggable log sink so the runtime can report watch restarts and
// retries without choosing a logging library for its users.

#include <functional>
#include <string_view>

namespace tally::runtime {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink (default: warnings and errors to stderr). Not for use
// while other threads log.
void setLogSink(LogSink sink);
void log(LogLevel level, std::string_view message);

}  // namespace tally::runtime
