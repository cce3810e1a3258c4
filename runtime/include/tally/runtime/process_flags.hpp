#pragma once
// The flags both binaries take, declared once: where the API server is, how
// the process logs, how its listener serves, and (the controller) how it
// campaigns for its Lease. Each binary adds them to its command line and turns
// them into the runtime's options here, so a flag means the same in both.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

#include "tally/runtime/http/server.hpp"
#include "tally/runtime/leader_election.hpp"
#include "tally/runtime/process.hpp"

namespace tally::runtime::process {

// --kubeconfig, --context, --log-level, --log-format.
struct ProcessFlags {
  std::string kubeconfig, context;
  std::string logLevel = "info", logFormat = "json";
};
void addProcessFlags(CLI::App& app, ProcessFlags& flags);
ClientFlags clientFlags(const ProcessFlags& flags, std::string userAgent);

// --threads, --max-connections, --read-timeout, --idle-timeout,
// --tls-cert-file, --tls-key-file of a binary's main listener. `serves` names
// what it serves in the help ("the admission webhooks", "the verbs").
struct ServingFlags {
  unsigned threads = 2;
  std::size_t maxConnections = 1024;
  std::string readTimeout = "10s", idleTimeout = "90s";
  std::string tlsCert, tlsKey;
};
void addServingFlags(CLI::App& app, ServingFlags& flags, const std::string& serves);
// Both TLS files or neither; the durations parse (std::invalid_argument otherwise).
http::ServerOptions serverOptions(const ServingFlags& flags);

// --leader-elect and --leader-election-{id,namespace,identity,lease-duration,
// renew-deadline,retry-period}.
struct LeaderElectionFlags {
  bool elect = true;
  std::string leaseName, leaseNamespace, identity;
  std::string leaseDuration = "15s", renewDeadline = "10s", retryPeriod = "2s";
};
void addLeaderElectionFlags(CLI::App& app, LeaderElectionFlags& flags);
// Empty when --leader-elect=false (this replica leads alone).
std::optional<LeaderElectionConfig> leaderElection(const LeaderElectionFlags& flags);

// $POD_NAME, else host_pid: a replica's name in Leases and Events.
std::string defaultIdentity(std::string_view fallbackHost);

}  // namespace tally::runtime::process
