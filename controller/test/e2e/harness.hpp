#pragma once
// What the controller's e2e tests share: replicas of the real tally-controller
// binary started as processes against the cluster of cluster.hpp, kubectl
// with inline YAML, and the objects the tests order.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tally/runtime/testing/e2e/cluster.hpp"

namespace tally::runtime::e2e {

using namespace std::chrono_literals;

inline constexpr const char* kAdmin = "tally-e2e-admin";
inline constexpr const char* kH200 = "nvidia.com/GH100_H200_SXM_141GB";

template <class F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return f();
}

std::uint16_t freePort();
inline Cluster& cluster() { return Cluster::instance(); }
inline std::string kubectl(const std::string& args, int* rc = nullptr) { return cluster().kubectl(args, rc); }
// kubectl apply of a YAML document given inline.
std::string applyYaml(const std::string& yaml, int* rc = nullptr, const std::string& extra = "");
std::string device(const std::string& ns, const std::string& name, const std::string& cls, int count);
std::string gpuClass(const std::string& name, const std::string& resource, int maxCount, bool entitlement = false,
                     const std::string& extraMeta = "");
// kwok nodes through tally-fixtures (Ready, vm-passthrough, `units` of `resource`).
bool gpuNodes(const std::string& prefix, int count, int units, const std::string& resource = kH200);
// The status curl gets for `url`; `curlArgs` are added (headers, certificates).
int httpStatus(const std::string& url, const std::string& curlArgs = "");
// curl arguments presenting the cluster admin's bearer token (GET /usage
// reviews it: TokenReview, then may it get /usage).
std::string adminBearer();

struct Replica {
  pid_t pid = -1;
  std::uint16_t webhookPort = 0, opsPort = 0;
  std::string identity, log;
};

// --leader-election-* short (lease 4 s), --controller-identity=kAdmin, the
// certificate for 127.0.0.1, caBundle kept in `configuration`; reviews only
// from the API server's webhook client certificate (the cluster's CA, name
// tally-webhook-client).
Replica startReplica(const std::string& identity, const std::string& configuration,
                     const std::vector<std::string>& extraArgs = {});
// The wait status of the replica after `signal` (-1 when it was not running).
int stopReplica(Replica& r, int signal);
std::string metricsOf(const Replica& r);
// The sum of the series `name` on r's /metrics whose labels contain `labels`
// (all of them when empty): `code="CountAboveMax"`, say.
double metricOf(const Replica& r, const std::string& name, const std::string& labels = "");

// A helper process of a test (python3 SCRIPT ARGS...; stdout and stderr to
// /dev/null), stopped with SIGTERM and reaped however the test ends.
class PythonProcess {
 public:
  PythonProcess(const std::string& script, const std::vector<std::string>& args);
  ~PythonProcess();
  PythonProcess(const PythonProcess&) = delete;
  PythonProcess& operator=(const PythonProcess&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// e2e/proxy/tcp_proxy.py on 127.0.0.1:`port` in front of the host:port lines
// of `backendsFile`; `extraArgs` such as --state FILE or --block-file FILE.
std::unique_ptr<PythonProcess> startTcpProxy(std::uint16_t port, const std::string& backendsFile,
                                             const std::vector<std::string>& extraArgs = {});

// Replicas behind one address, as behind the Service tally-controller: the
// round-robin TCP proxy in front of their webhook ports. Webhook
// configurations name port() once and keep it. A replica that dies is
// skipped (its port refuses, as a Service drops an endpoint that is not
// ready); its replacement, a new process on a new port, joins when the test
// calls endpoints(), as a Service's endpoints follow the Deployment's pods.
class ReplicaService {
 public:
  // False when the proxy did not come up within 10 s.
  bool start(const std::vector<const Replica*>& replicas);
  std::uint16_t port() const { return port_; }
  void endpoints(const std::vector<const Replica*>& replicas);
  // Connections the proxy handed to each backend ("127.0.0.1:PORT") so far.
  std::map<std::string, int> connections() const;
  void stop() { proxy_.reset(); }

 private:
  std::unique_ptr<PythonProcess> proxy_;
  std::uint16_t port_ = 0;
  std::string backends_, state_;
};

// A configuration of manifests/webhook/ ("gpudevices" for gpudevices.yaml),
// its objects narrowed to `namespaces` when some are given.
struct ShippedWebhook {
  std::string manifest;
  std::vector<std::string> namespaces = {};
};
// The shipped configurations `webhooks` as this cluster calls a replica, by
// manifests/render-webhooks.py: clientConfig https://127.0.0.1:`port` and the
// shipped path, their webhooks in order in one configuration `name` (each
// under its shipped name when `name` is empty), every other field as shipped.
// JSON for applyYaml; empty when the script fails (its reason on stderr).
std::string shippedWebhooks(const std::string& name, std::uint16_t port, const std::vector<ShippedWebhook>& webhooks);
std::string leaseHolder();
// tally-extender on loopback (plain HTTP, --gates=evaluated, unorganized GPU
// namespaces allowed; its log in a folder named after `tag`), and the
// cluster's kube-scheduler restarted with e2e/suite/scheduler-config.yaml
// pointed at it; its port (verbs, /readyz, /metrics) in `extenderPort` when
// given. False (with the reason printed) when either fails.
bool startExtenderAndScheduler(const std::string& clusterName, const std::string& tag, pid_t& extenderPid,
                               std::uint16_t* extenderPort = nullptr);
// Every GPUDeviceClass carries a CreationOpen condition: the auditor decided
// each pool once (until then every door refuses it, "not audited yet").
bool gatesDecided();

}  // namespace tally::runtime::e2e
