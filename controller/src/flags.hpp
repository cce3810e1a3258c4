#pragma once
// tally-controller's command line: the flags both binaries share
// (runtime/process_flags.hpp) and the controller's own, each group added by
// one function, and the options of each part read from them.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tally/controller/alert_source.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/controller/organization_webhook.hpp"
#include "tally/controller/pool_auditor.hpp"
#include "tally/controller/quota_reconciler.hpp"
#include "tally/controller/usage_recorder.hpp"
#include "tally/controller/vmi_webhook.hpp"
#include "tally/runtime/admission/certificate_keeper.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/runtime/process_flags.hpp"
#include "tally/state/source_flags.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {

struct Flags {
  runtime::process::ProcessFlags process;
  runtime::process::ServingFlags serving{.threads = 4};
  runtime::process::LeaderElectionFlags leader{.leaseName = "tally-controller",
                                               .leaseNamespace = "tally-system",
                                               .identity = runtime::process::defaultIdentity("tally-controller")};
  std::string webhookAddress = "0.0.0.0";
  std::uint16_t webhookPort = 9443;
  std::string opsAddress = "0.0.0.0";
  std::uint16_t opsPort = 8080;
  std::string webhookClientCa;
  std::vector<std::string> webhookAllowedClients;
  bool insecureWebhookCallers = false;
  std::string certSecret = "tally-webhook-tls", certDir = "/tmp/tally-controller-certs";
  std::string serviceName = "tally-controller", serviceNamespace = "tally-system";
  std::vector<std::string> validatingConfigurations{"tally-gpudevice-validating", "tally-organization-validating",
                                                    "tally-gpudeviceclass-validating"};
  std::vector<std::string> mutatingConfigurations;
  std::vector<std::string> certDnsNames, certIpAddresses;
  std::string bundlePropagation = "10s";
  std::string servingValidity = "8760h", caValidity = "43800h", caOverlap = "1h";
  std::string controllerIdentity = std::string(kDefaultControllerIdentity);
  std::vector<std::string> gpuSchedulers{"tally-scheduler"};
  // The quota controller and the Organization webhook read the add-on
  // catalogue; the VM door needs the KubeVirt CR (which host devices it permits).
  state::SourceFlags source{.watchKubevirt = true};
  std::string cacheSyncTimeout = "120s";
  bool binder = true;
  std::string binderRetry = "5s";
  int binderMaxConflicts = 8;
  std::string vmiPlacementWait = "5s";
  unsigned vmiWorkers = 16;
  std::string vmiAttachTimeout = "60s";
  std::string catalogReviewTtl = "10s";
  unsigned catalogWorkers = 2;
  bool quota = true;
  std::string quotaResync = "5m";
  std::string organizationDecisionTimeout = "3s";
  std::string organizationSettle = "2s";
  bool auditor = true;
  std::string auditInterval = "24h", auditDebounce = "1s", auditStaleAfter = "300s", releaseStuckAfter = "24h";
  std::string auditConvergence = "5m";
  std::string alertmanagerUrl, alertmanagerInterval = "30s", alertmanagerTimeout = "5s";
  std::string alertmanagerPoolLabel = "gpu_pool";
  bool usageRecorder = true;
  std::string usageNamespace = "tally-system", usageInterval = "60s", usageCheckInterval = "5s";
};

void addFlags(CLI::App& app, Flags& flags);
// What the command line cannot say by itself: contradictions, missing pairs.
// The message names the flags; empty when the flags hold together.
std::string contradiction(const Flags& flags);

// The options of each part, read from the flags (a bad duration throws
// std::invalid_argument naming its flag).
runtime::ManagerOptions managerOptions(const Flags& f, observability::Registry& registry);
runtime::admission::CertificateKeeperOptions keeperOptions(const Flags& f);
DeviceBinderOptions binderOptions(const Flags& f, observability::Registry& registry);
QuotaReconcilerOptions quotaOptions(const Flags& f, observability::Registry& registry);
PoolAuditorOptions auditorOptions(const Flags& f, observability::Registry& registry);
VmiWebhookOptions vmiOptions(const Flags& f, observability::Registry& registry);
AlertSourceOptions alertOptions(const Flags& f, observability::Registry& registry);
UsageRecorderOptions usageOptions(const Flags& f, observability::Registry& registry);
OrganizationWebhookOptions organizationOptions(const Flags& f);
// The writer's options: publication interval, tenancy, the watched kinds, and,
// without the auditor, the gates the doors evaluate themselves.
state::Writer::Options writerOptions(const Flags& f, const state::SourceSettings& settings);
// A duration flag's value in the unit `D`.
template <class D>
D duration(std::string_view flag, std::string_view text) {
  return std::chrono::duration_cast<D>(runtime::process::durationFlag(flag, text));
}

}  // namespace tally::controller
