#include "tally/runtime/process_flags.hpp"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "tally/common/log.hpp"

namespace tally::runtime::process {

void addProcessFlags(CLI::App& app, ProcessFlags& f) {
  app.add_option("--kubeconfig", f.kubeconfig, "Kubeconfig file; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  app.add_option("--context", f.context, "Kubeconfig context; empty: the current one");
  app.add_option("--log-level", f.logLevel, "debug, info, warning or error")->capture_default_str();
  app.add_option("--log-format", f.logFormat, "json or text (logfmt)")->capture_default_str();
}

ClientFlags clientFlags(const ProcessFlags& f, std::string userAgent) {
  return {f.kubeconfig, f.context, std::move(userAgent)};
}

void addServingFlags(CLI::App& app, ServingFlags& f, const std::string& serves) {
  app.add_option("--threads", f.threads, "Threads of the listener serving " + serves)->capture_default_str();
  app.add_option("--max-connections", f.maxConnections,
                 "Open connections each listener keeps at most; more are closed as they are accepted")
      ->capture_default_str();
  app.add_option("--read-timeout", f.readTimeout, "Time to read one request once it started (and to write the answer)")
      ->capture_default_str();
  app.add_option("--idle-timeout", f.idleTimeout, "Time a kept-alive connection may wait for its next request")
      ->capture_default_str();
  app.add_option("--tls-cert-file", f.tlsCert,
                 "Certificate chain (PEM) of the listener serving " + serves + ", re-read when it changes");
  app.add_option("--tls-key-file", f.tlsKey, "Private key (PEM) of --tls-cert-file");
}

http::ServerOptions serverOptions(const ServingFlags& f) {
  if (f.tlsCert.empty() != f.tlsKey.empty()) {
    throw std::invalid_argument("TLS needs both --tls-cert-file and --tls-key-file");
  }
  http::ServerOptions o;
  o.threads = f.threads;
  o.maxConnections = f.maxConnections;
  o.readTimeout = durationFlag("--read-timeout", f.readTimeout);
  o.idleTimeout = durationFlag("--idle-timeout", f.idleTimeout);
  return o;
}

void addLeaderElectionFlags(CLI::App& app, LeaderElectionFlags& f) {
  app.add_option("--leader-elect", f.elect,
                 "Campaign for the Lease before leader-only work; false: this replica leads alone")
      ->capture_default_str();
  app.add_option("--leader-election-id", f.leaseName, "Name of the leader Lease")->capture_default_str();
  app.add_option("--leader-election-namespace", f.leaseNamespace, "Namespace of the leader Lease")
      ->capture_default_str();
  app.add_option("--leader-election-identity", f.identity,
                 "Holder identity in the Lease; default: $POD_NAME or host_pid")
      ->capture_default_str();
  app.add_option("--leader-election-lease-duration", f.leaseDuration,
                 "How long a standby waits after the leader's last renewal before taking the Lease")
      ->capture_default_str();
  app.add_option("--leader-election-renew-deadline", f.renewDeadline,
                 "How long the leader keeps trying to renew before it gives up leading")
      ->capture_default_str();
  app.add_option("--leader-election-retry-period", f.retryPeriod, "Time between acquire or renew attempts")
      ->capture_default_str();
}

std::optional<LeaderElectionConfig> leaderElection(const LeaderElectionFlags& f) {
  if (!f.elect) return std::nullopt;
  LeaderElectionConfig le;
  le.leaseName = f.leaseName;
  le.leaseNamespace = f.leaseNamespace;
  le.identity = f.identity;
  le.leaseDuration = durationFlag("--leader-election-lease-duration", f.leaseDuration);
  le.renewDeadline = durationFlag("--leader-election-renew-deadline", f.renewDeadline);
  le.retryPeriod = durationFlag("--leader-election-retry-period", f.retryPeriod);
  le.onNewLeader = [](const std::string& who) { logInfo("leader observed", {{"identity", who}}); };
  return le;
}

std::string defaultIdentity(std::string_view fallbackHost) {
  if (const char* pod = std::getenv("POD_NAME"); pod && *pod) return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return std::string(host[0] ? std::string_view(host) : fallbackHost) + "_" + std::to_string(::getpid());
}

}  // namespace tally::runtime::process
