#pragma once
// A real control plane for the runtime's integration tests: brings up
// e2e/cluster/up with a unique name and tears it down; offers the few
// operations the tests need on it (kubectl, apiserver restart, etcd compaction).

#include <memory>
#include <string>
#include <vector>

#include "tally/runtime/client.hpp"

namespace tally::runtime::e2e {

// Runs a command; returns its stdout; *exitCode receives the status.
std::string runCommand(const std::string& cmd, int* exitCode = nullptr);

class Cluster {
 public:
  static Cluster& instance();  // set by the gtest environment
  // controllerManager: also kube-controller-manager with the controllers
  // e2e/cluster/up names (the resource-claim controller among them, for
  // claims from a pod's ResourceClaimTemplates); the runtime's own tests need
  // none.
  bool up(const std::string& name, bool controllerManager = false);
  void down();

  const std::string& kubeconfig() const { return kubeconfig_; }
  // The directory of the cluster's binaries (kubectl, tally-fixtures, ...).
  const std::string& bin() const { return bin_; }
  // The cluster's state directory (pki/ holds its CA and client certificates:
  // webhook-client.crt is what the API server presents to webhooks).
  const std::string& state() const { return state_; }
  std::shared_ptr<Client> client(RetryPolicy retry = {}) const;
  std::string kubectl(const std::string& args, int* exitCode = nullptr) const;
  // Current etcd revision, then a physical compaction at it.
  bool compactEtcd() const;
  // Stops kube-apiserver (SIGTERM) and starts it again with the same
  // command line; returns once /readyz answers.
  bool restartApiserver() const;
  bool killApiserver() const;
  bool startApiserver() const;

 private:
  std::string env(const std::string& key) const;
  std::string name_;
  std::string state_;
  std::string bin_;
  std::string kubeconfig_;
  mutable std::vector<std::string> apiserverArgs_;
};

}  // namespace tally::runtime::e2e
