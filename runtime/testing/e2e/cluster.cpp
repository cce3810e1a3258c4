#include "tally/runtime/testing/e2e/cluster.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "tally/runtime/config.hpp"

namespace tally::runtime::e2e {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool processAlive(pid_t pid) {
  const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

}  // namespace

std::string runCommand(const std::string& cmd, int* exitCode) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    if (exitCode) *exitCode = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (exitCode) *exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

Cluster& Cluster::instance() {
  static Cluster c;
  return c;
}

bool Cluster::up(const std::string& name, bool controllerManager) {
  name_ = name;
  int rc = 0;
  // Without controllerManager no kube-controller-manager runs. The cluster's
  // watchdog takes it down if this process dies before TearDown runs (a crash
  // or a timeout's SIGKILL).
  const std::string out = runCommand(std::string("TALLY_E2E_CONTROLLER_MANAGER=") + (controllerManager ? "1" : "0") +
                                         " TALLY_E2E_OWNER_PID=" + std::to_string(::getpid()) + " " +
                                         std::string(TALLY_REPO_DIR) + "/e2e/cluster/up --name " + name,
                                     &rc);
  if (rc != 0) return false;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    auto take = [&](const std::string& prefix, std::string& into) {
      if (line.rfind(prefix, 0) == 0) into = line.substr(prefix.size());
    };
    take("export KUBECONFIG=", kubeconfig_);
    take("export TALLY_E2E_STATE=", state_);
    take("export TALLY_E2E_BIN=", bin_);
  }
  return !kubeconfig_.empty() && !state_.empty();
}

void Cluster::down() {
  if (name_.empty()) return;
  runCommand(std::string(TALLY_REPO_DIR) + "/e2e/cluster/down --name " + name_ + " 2>/dev/null");
  name_.clear();
}

std::shared_ptr<Client> Cluster::client(RetryPolicy retry) const {
  auto cfg = loadKubeconfig(kubeconfig_);
  if (!cfg) return nullptr;
  auto c = Client::create(std::move(*cfg), retry);
  return c ? *c : nullptr;
}

std::string Cluster::kubectl(const std::string& args, int* exitCode) const {
  return runCommand("KUBECONFIG=" + kubeconfig_ + " " + bin_ + "/kubectl " + args + " 2>&1", exitCode);
}

std::string Cluster::env(const std::string& key) const {
  std::istringstream in(readFile(state_ + "/env"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return {};
}

bool Cluster::compactEtcd() const {
  const std::string base = "http://127.0.0.1:" + env("ETCD_PORT");
  const std::string range = runCommand("curl -s -X POST " + base + "/v3/kv/range -d '{\"key\":\"AA==\"}'");
  const auto pos = range.find("\"revision\":\"");
  if (pos == std::string::npos) return false;
  const std::string rev = range.substr(pos + 12, range.find('"', pos + 12) - pos - 12);
  int rc = 0;
  const std::string out = runCommand(
      "curl -s -X POST " + base + "/v3/kv/compaction -d '{\"revision\":\"" + rev + "\",\"physical\":true}'", &rc);
  return rc == 0 && out.find("error") == std::string::npos;
}

bool Cluster::killApiserver() const {
  const std::string pidFile = state_ + "/pids/kube-apiserver.pid";
  const pid_t pid = static_cast<pid_t>(std::atol(readFile(pidFile).c_str()));
  if (pid <= 0 || !processAlive(pid)) return false;
  std::string cmdline = readFile("/proc/" + std::to_string(pid) + "/cmdline");
  apiserverArgs_.clear();
  for (size_t start = 0; start < cmdline.size();) {
    const size_t end = cmdline.find('\0', start);
    apiserverArgs_.push_back(cmdline.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 300 && processAlive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (processAlive(pid)) ::kill(pid, SIGKILL);
  return true;
}

bool Cluster::startApiserver() const {
  if (apiserverArgs_.empty()) return false;
  const std::string log = state_ + "/logs/kube-apiserver.log";
  const std::string pidFile = state_ + "/pids/kube-apiserver.pid";
  int pipefd[2];
  if (::pipe(pipefd) != 0) return false;
  const pid_t child = ::fork();
  if (child == 0) {
    // Double fork so the server is not our child: `down` stops it by pid.
    ::setsid();
    const pid_t grandchild = ::fork();
    if (grandchild != 0) {
      ::write(pipefd[1], &grandchild, sizeof grandchild);
      ::_exit(0);
    }
    const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    for (int f = 3; f < 256; ++f) ::close(f);
    std::vector<char*> argv;
    for (auto& a : apiserverArgs_) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_t grandchild = 0;
  ::read(pipefd[0], &grandchild, sizeof grandchild);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  ::waitpid(child, nullptr, 0);
  std::ofstream(pidFile) << grandchild << "\n";
  for (int i = 0; i < 600; ++i) {
    int rc = 0;
    kubectl("get --raw /readyz", &rc);
    if (rc == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool Cluster::restartApiserver() const { return killApiserver() && startApiserver(); }

}  // namespace tally::runtime::e2e
