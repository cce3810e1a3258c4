#pragma once
// Process glue both binaries share: duration flags, log setup, the API client
// from the usual flags, and the wait for SIGTERM.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "tally/runtime/client.hpp"
#include "tally/runtime/result.hpp"

namespace tally::runtime::process {

// "250ms", "10s", "2m", "1h"; a bare number is seconds. Errors quote the text.
Result<std::chrono::milliseconds> parseDuration(std::string_view text);

// The value of duration flag `flag` ("--read-timeout"); a bad one throws
// std::invalid_argument("--read-timeout: <why>"), which stops the start.
std::chrono::milliseconds durationFlag(std::string_view flag, std::string_view text);

// The --log-level and --log-format flags: the lowest level the process's log
// (tally/common/log.hpp) writes ("debug" | "info" | "warning" | "error") and
// its line format ("json" | "text"). Nothing changes when either is refused.
Status setUpLogging(std::string_view level, std::string_view format = "json");

struct ClientFlags {
  std::string kubeconfig;  // empty: $KUBECONFIG, in-cluster, then ~/.kube/config
  std::string context;     // empty: the kubeconfig's current context
  std::string userAgent;
};

// The API client from the flags. Before anything else uses it, it asks the
// API server for its version once: the log names the server, and the TLS
// session of that first connection is what every later connection resumes
// (watches starting together would otherwise each shake hands in full). An
// unreachable server is a warning, not an error: informers retry and
// readiness stays false until they sync.
Result<std::shared_ptr<Client>> connect(const ClientFlags& flags);

}  // namespace tally::runtime::process
