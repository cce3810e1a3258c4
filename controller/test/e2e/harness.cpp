#include "harness.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <simdjson.h>

extern char** environ;

namespace tally::runtime::e2e {

std::uint16_t freePort() {
  int rc = 0;
  std::string out = runCommand(
      "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'", &rc);
  return static_cast<std::uint16_t>(std::stoi(out));
}

std::string applyYaml(const std::string& yaml, int* rc, const std::string& extra) {
  static std::atomic<int> n{0};
  const auto path = std::filesystem::temp_directory_path() /
                    ("ctl-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".yaml");
  std::ofstream(path) << yaml;
  std::string out = kubectl("apply " + extra + " -f " + path.string(), rc);
  std::filesystem::remove(path);
  return out;
}

std::string device(const std::string& ns, const std::string& name, const std::string& cls, int count) {
  return "apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDevice\nmetadata: {name: " + name + ", namespace: " + ns +
         "}\nspec: {class: " + cls + ", count: " + std::to_string(count) + "}\n";
}

std::string gpuClass(const std::string& name, const std::string& resource, int maxCount, bool entitlement,
                     const std::string& extraMeta) {
  return "apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata: {name: " + name + extraMeta +
         "}\nspec: {workload: vm, allocation: passthrough, resourceName: " + resource +
         ", nodeMode: vm-passthrough, memoryMiB: 144384, maxCount: " + std::to_string(maxCount) +
         (entitlement ? ", requiresEntitlement: true" : "") + "}\n";
}

bool gpuNodes(const std::string& prefix, int count, int units, const std::string& resource) {
  int rc = 0;
  runCommand(cluster().bin() + "/tally-fixtures nodes --count " + std::to_string(count) + " --prefix " + prefix +
                 " --mode vm-passthrough --resource " + resource + "=" + std::to_string(units) +
                 " --wait-ready --timeout 120s --kubeconfig " + cluster().kubeconfig() + " 2>&1",
             &rc);
  return rc == 0;
}

int httpStatus(const std::string& url, const std::string& curlArgs) {
  int rc = 0;
  std::string out =
      runCommand("curl -s -o /dev/null -w '%{http_code}' --max-time 3 " + curlArgs + " '" + url + "'", &rc);
  return out.empty() ? 0 : std::atoi(out.c_str());
}

std::string adminBearer() {
  std::ifstream in(cluster().state() + "/pki/admin.token");
  std::string token;
  std::getline(in, token);
  return "-H 'Authorization: Bearer " + token + "'";
}

Replica startReplica(const std::string& identity, const std::string& configuration,
                     const std::vector<std::string>& extraArgs) {
  Replica r;
  r.identity = identity;
  r.webhookPort = freePort();
  r.opsPort = freePort();
  const auto dir = std::filesystem::temp_directory_path() / ("ctl-e2e-" + std::to_string(::getpid()) + "-" + identity);
  std::filesystem::create_directories(dir);
  r.log = (dir / "log").string();
  // A test may give the replica its own kubeconfig (e.g. through a proxy).
  const bool ownKubeconfig = std::any_of(extraArgs.begin(), extraArgs.end(),
                                         [](const std::string& a) { return a.starts_with("--kubeconfig="); });
  std::vector<std::string> args = {TALLY_CONTROLLER_BINARY,
                                   "--webhook-bind-address=127.0.0.1",
                                   "--webhook-port=" + std::to_string(r.webhookPort),
                                   "--ops-bind-address=127.0.0.1",
                                   "--ops-port=" + std::to_string(r.opsPort),
                                   "--cert-dir=" + (dir / "certs").string(),
                                   "--cert-ip-addresses=127.0.0.1",
                                   "--webhook-client-ca-file=" + cluster().state() + "/pki/ca.crt",
                                   "--webhook-allowed-clients=tally-webhook-client",
                                   "--service-namespace=tally-system",
                                   "--webhook-configurations=" + configuration,
                                   "--bundle-propagation=1s",
                                   "--leader-election-namespace=tally-system",
                                   "--leader-election-identity=" + identity,
                                   "--leader-election-lease-duration=4s",
                                   "--leader-election-renew-deadline=3s",
                                   "--leader-election-retry-period=500ms",
                                   std::string("--controller-identity=") + kAdmin,
                                   "--log-format=text"};
  // Most tenants here live in bare namespaces; a test of the tenancy rule
  // passes its own --unorganized-gpu-namespaces.
  if (!ownKubeconfig) args.push_back("--kubeconfig=" + cluster().kubeconfig());
  if (std::none_of(extraArgs.begin(), extraArgs.end(),
                   [](const std::string& a) { return a.starts_with("--unorganized-gpu-namespaces"); })) {
    args.push_back("--unorganized-gpu-namespaces=allow");
  }
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Appended: a replica restarted under the same identity keeps the first log.
  posix_spawn_file_actions_addopen(&actions, 1, r.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (posix_spawn(&r.pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) r.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return r;
}

bool gatesDecided() {
  int rc = 0;
  const std::string out = kubectl(
      R"(get gpudeviceclasses -o 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="CreationOpen")].status}{"\n"}{end}')",
      &rc);
  if (rc != 0) return false;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '=') return false;
  }
  return true;
}

int stopReplica(Replica& r, int signal) {
  if (r.pid <= 0) return -1;
  ::kill(r.pid, signal);
  int status = 0;
  ::waitpid(r.pid, &status, 0);
  r.pid = -1;
  return status;
}

PythonProcess::PythonProcess(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"python3", script};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (posix_spawnp(&pid_, "python3", &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
}

PythonProcess::~PythonProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
}

std::unique_ptr<PythonProcess> startTcpProxy(std::uint16_t port, const std::string& backendsFile,
                                             const std::vector<std::string>& extraArgs) {
  std::vector<std::string> args = {"--listen", "127.0.0.1:" + std::to_string(port), "--backends", backendsFile};
  args.insert(args.end(), extraArgs.begin(), extraArgs.end());
  return std::make_unique<PythonProcess>(std::string(TALLY_REPO_DIR) + "/e2e/proxy/tcp_proxy.py", args);
}

bool ReplicaService::start(const std::vector<const Replica*>& replicas) {
  static std::atomic<int> n{0};
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ctl-service-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
  std::filesystem::create_directories(dir);
  backends_ = (dir / "backends").string();
  state_ = (dir / "state.json").string();
  endpoints(replicas);
  port_ = freePort();
  proxy_ = startTcpProxy(port_, backends_, {"--state", state_});
  return eventually([this] { return std::filesystem::exists(state_); }, 10s);
}

void ReplicaService::endpoints(const std::vector<const Replica*>& replicas) {
  // Whole or not at all: the proxy rereads the file when it changes.
  const std::string next = backends_ + ".next";
  {
    std::ofstream out(next);
    for (const Replica* r : replicas) {
      if (r && r->pid > 0) out << "127.0.0.1:" << r->webhookPort << "\n";
    }
  }
  std::filesystem::rename(next, backends_);
}

std::map<std::string, int> ReplicaService::connections() const {
  std::ifstream in(state_);
  std::stringstream text;
  text << in.rdbuf();
  std::map<std::string, int> out;
  simdjson::padded_string json(text.str());
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object connections;
  if (parser.iterate(json).get(doc) || doc["connections"].get_object().get(connections)) return out;
  for (auto field : connections) {
    std::string_view key;
    std::int64_t count = 0;
    if (field.unescaped_key().get(key) || field.value().get_int64().get(count)) continue;
    out[std::string(key)] = static_cast<int>(count);
  }
  return out;
}

std::string metricsOf(const Replica& r) {
  return runCommand("curl -s --max-time 3 http://127.0.0.1:" + std::to_string(r.opsPort) + "/metrics");
}

double metricOf(const Replica& r, const std::string& name, const std::string& labels) {
  double sum = 0;
  std::istringstream in(metricsOf(r));
  for (std::string line; std::getline(in, line);) {
    if (!(line.starts_with(name + "{") || line.starts_with(name + " ")) || line.find(labels) == std::string::npos) {
      continue;
    }
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

std::string shippedWebhooks(const std::string& name, std::uint16_t port, const std::vector<ShippedWebhook>& webhooks) {
  std::string command = "python3 " + std::string(TALLY_REPO_DIR) +
                        "/manifests/render-webhooks.py --url https://127.0.0.1:" + std::to_string(port);
  if (!name.empty()) command += " --name '" + name + "'";
  for (const ShippedWebhook& w : webhooks) {
    command += " '" + w.manifest;
    for (std::size_t i = 0; i < w.namespaces.size(); ++i) command += (i == 0 ? "=" : ",") + w.namespaces[i];
    command += "'";
  }
  int rc = 0;
  std::string out = runCommand(command, &rc);
  return rc == 0 ? out : "";
}

std::string leaseHolder() {
  return kubectl("get lease -n tally-system tally-controller -o jsonpath={.spec.holderIdentity}");
}

bool startExtenderAndScheduler(const std::string& clusterName, const std::string& tag, pid_t& extenderPid,
                               std::uint16_t* extenderPort) {
  const std::uint16_t port = freePort();
  if (extenderPort) *extenderPort = port;
  const auto dir = std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string log = (dir / "tally-extender.log").string();
  extenderPid = ::fork();
  if (extenderPid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string kubeconfig = "--kubeconfig=" + cluster().kubeconfig(),
                      portFlag = "--port=" + std::to_string(port);
    // The tests run no pool auditor (--enable-pool-auditor=false): the
    // extender evaluates each pool's gate itself, as the controller's doors do.
    ::execl(TALLY_EXTENDER_BINARY, TALLY_EXTENDER_BINARY, kubeconfig.c_str(), "--bind-address=127.0.0.1",
            portFlag.c_str(), "--url-prefix=/tally", "--metrics-port=0", "--gates=evaluated",
            "--unorganized-gpu-namespaces=allow", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const std::string ready = "http://127.0.0.1:" + std::to_string(port) + "/readyz";
  if (!eventually([&] { return httpStatus(ready) == 200; }, 60s)) {
    std::printf("tally-extender never became ready; log %s\n", log.c_str());
    return false;
  }
  std::ifstream in(std::string(TALLY_REPO_DIR) + "/e2e/suite/scheduler-config.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string config = text.str();
  const std::string marker = "__EXTENDER_URL__";
  for (auto at = config.find(marker); at != std::string::npos; at = config.find(marker)) {
    config.replace(at, marker.size(), "http://127.0.0.1:" + std::to_string(port) + "/tally");
  }
  const std::string path = (dir / "scheduler-config.yaml").string();
  std::ofstream(path) << config;
  int rc = 0;
  std::string out = runCommand(std::string(TALLY_REPO_DIR) + "/e2e/cluster/up --name " + clusterName +
                                   " --restart-scheduler --scheduler-config " + path + " 2>&1",
                               &rc);
  if (rc != 0) std::printf("restarting kube-scheduler failed: %s\n", out.c_str());
  return rc == 0;
}

}  // namespace tally::runtime::e2e
