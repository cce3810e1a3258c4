// tally-controller: Tally's admission webhooks and, on the Lease holder, its
// leader-only controllers. Every replica runs the informers and the state
// writer and answers the webhooks from its own snapshot; the leader keeps the
// serving certificate and runs the device binder and the quota controller.

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/controller/catalog_endpoint.hpp"
#include "tally/controller/alert_source.hpp"
#include "tally/controller/class_webhook.hpp"
#include "tally/controller/device_binder.hpp"
#include "tally/controller/pool_auditor.hpp"
#include "tally/controller/usage_recorder.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/controller/organization_webhook.hpp"
#include "tally/controller/pod_webhooks.hpp"
#include "tally/controller/quota_reconciler.hpp"
#include "tally/controller/readiness.hpp"
#include "tally/runtime/admission/certificate_keeper.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/runtime/http/operation_routes.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/runtime/manager.hpp"
#include "tally/runtime/process.hpp"
#include "tally/state/source_flags.hpp"
#include "tally/controller/vmi_webhook.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include "tally/state/informers.hpp"

namespace {

using namespace tally;
namespace http = tally::runtime::http;
namespace admission = tally::runtime::admission;
namespace obs = tally::observability;

std::string defaultIdentity() {
  if (const char* pod = std::getenv("POD_NAME"); pod && *pod) return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return std::string(host[0] ? host : "tally-controller") + "_" + std::to_string(::getpid());
}

struct Flags {
  std::string kubeconfig, context;
  std::string webhookAddress = "0.0.0.0";
  std::uint16_t webhookPort = 9443;
  std::string opsAddress = "0.0.0.0";
  std::uint16_t opsPort = 8080;
  unsigned threads = 4;
  std::size_t maxConnections = 1024;
  std::string readTimeout = "10s", idleTimeout = "90s";
  std::string tlsCert, tlsKey;
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
  bool leaderElect = true;
  std::string leaseName = "tally-controller", leaseNamespace = "tally-system", identity = defaultIdentity();
  std::string leaseDuration = "15s", renewDeadline = "10s", retryPeriod = "2s";
  std::string controllerIdentity = std::string(controller::kDefaultControllerIdentity);
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
  bool auditor = true;
  std::string auditInterval = "24h", auditDebounce = "1s", auditStaleAfter = "300s", releaseStuckAfter = "24h";
  std::string auditConvergence = "5m";
  std::string alertmanagerUrl, alertmanagerInterval = "30s", alertmanagerTimeout = "5s";
  std::string alertmanagerPoolLabel = "gpu_pool";
  bool usageRecorder = true;
  std::string usageNamespace = "tally-system", usageInterval = "60s", usageCheckInterval = "5s";
  std::string logLevel = "info", logFormat = "json";
};

void addFlags(CLI::App& app, Flags& f) {
  app.add_option("--kubeconfig", f.kubeconfig, "Kubeconfig file; empty: $KUBECONFIG, in-cluster, then ~/.kube/config");
  app.add_option("--context", f.context, "Kubeconfig context; empty: the current one");
  app.add_option("--webhook-bind-address", f.webhookAddress, "Address of the HTTPS admission webhook listener")
      ->capture_default_str();
  app.add_option("--webhook-port", f.webhookPort, "Port of the HTTPS webhooks (/validate/gpudevices)")
      ->capture_default_str();
  app.add_option("--ops-bind-address", f.opsAddress, "Address of the plain-HTTP /healthz, /readyz, /metrics listener")
      ->capture_default_str();
  app.add_option("--ops-port", f.opsPort, "Port of /healthz, /readyz, /metrics")->capture_default_str();
  app.add_option("--threads", f.threads, "Webhook server threads")->capture_default_str();
  app.add_option("--max-connections", f.maxConnections,
                 "Open connections the webhook server and the ops server each keep at most; more are closed as "
                 "they are accepted (tally_controller_webhook_rejected_total{kind=\"connection_limit\"})")
      ->capture_default_str();
  app.add_option("--catalog-review-ttl", f.catalogReviewTtl,
                 "How long GET /options remembers a token's TokenReview/SubjectAccessReview decision per namespace")
      ->capture_default_str();
  app.add_option("--catalog-workers", f.catalogWorkers,
                 "Threads that review GET /options callers (the reviews call the API server)")
      ->capture_default_str();
  app.add_option("--read-timeout", f.readTimeout, "Time to read one review and write its answer")
      ->capture_default_str();
  app.add_option("--idle-timeout", f.idleTimeout, "Time a kept-alive connection may wait for its next review")
      ->capture_default_str();
  app.add_option("--tls-cert-file", f.tlsCert,
                 "Serving certificate chain (PEM), used as is and re-read when it changes; empty: the leader "
                 "generates one into --cert-secret");
  app.add_option("--tls-key-file", f.tlsKey, "Private key (PEM) of --tls-cert-file");
  app.add_option("--webhook-client-ca-file", f.webhookClientCa,
                 "CA bundle (PEM) that signs the API server's client certificate for admission webhooks (the "
                 "kubeConfigFile of its AdmissionConfiguration); reviews from a caller without a certificate it "
                 "verifies get 401 and change nothing. Required unless --insecure-webhook-callers");
  app.add_option("--webhook-allowed-clients", f.webhookAllowedClients,
                 "Names (subject CN or DNS subjectAltName) a webhook caller's certificate must carry "
                 "(comma-separated); empty: any certificate --webhook-client-ca-file verifies")
      ->delimiter(',');
  app.add_option("--insecure-webhook-callers", f.insecureWebhookCallers,
                 "Serve admission reviews to any caller, without a client certificate: whoever reaches the "
                 "webhook port can then attach held devices; only for an API server that cannot present one")
      ->capture_default_str();
  app.add_option("--cert-secret", f.certSecret,
                 "Secret (in --service-namespace) holding the generated CA and serving certificate")
      ->capture_default_str();
  app.add_option("--cert-dir", f.certDir, "Directory every replica writes the serving certificate and key into")
      ->capture_default_str();
  app.add_option("--service-name", f.serviceName,
                 "Service the API server calls (its DNS names go into the certificate)")
      ->capture_default_str();
  app.add_option("--service-namespace", f.serviceNamespace, "Namespace of that Service and of --cert-secret")
      ->capture_default_str();
  app.add_option("--webhook-configurations", f.validatingConfigurations,
                 "ValidatingWebhookConfigurations whose caBundle the leader keeps (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--mutating-webhook-configurations", f.mutatingConfigurations,
                 "MutatingWebhookConfigurations whose caBundle the leader keeps (comma-separated)")
      ->delimiter(',');
  app.add_option("--cert-dns-names", f.certDnsNames, "Extra DNS names of the serving certificate (comma-separated)")
      ->delimiter(',');
  app.add_option("--cert-ip-addresses", f.certIpAddresses,
                 "IP addresses of the serving certificate, for a url clientConfig (comma-separated)")
      ->delimiter(',');
  app.add_option("--bundle-propagation", f.bundlePropagation,
                 "How long a new CA is in the injected caBundles before a certificate it signed is served")
      ->capture_default_str();
  app.add_option("--serving-cert-validity", f.servingValidity,
                 "Lifetime of a generated serving certificate (rotated after two thirds of it)")
      ->capture_default_str();
  app.add_option("--ca-validity", f.caValidity, "Lifetime of the generated CA (rotated after two thirds of it)")
      ->capture_default_str();
  app.add_option("--ca-overlap", f.caOverlap,
                 "How long a replaced CA stays in the caBundles after the certificate it signed stopped being served")
      ->capture_default_str();
  app.add_option("--leader-elect", f.leaderElect,
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
  app.add_option("--controller-identity", f.controllerIdentity,
                 "The only user allowed to change a GPUDevice's status (Tally's service account)")
      ->capture_default_str();
  app.add_option("--gpu-schedulers", f.gpuSchedulers,
                 "Scheduler profiles whose kube-scheduler calls tally-extender (comma-separated); the gpu-pods "
                 "mutating webhook points every GPU pod at the first, the validating one refuses a GPU pod naming "
                 "any other")
      ->delimiter(',')
      ->capture_default_str();
  state::addSourceFlags(app, f.source, "the webhooks");
  app.add_option("--cache-sync-timeout", f.cacheSyncTimeout,
                 "How long the runtime's own caches (certificate Secret, webhook configurations) may take to sync")
      ->capture_default_str();
  app.add_option("--enable-device-binder", f.binder,
                 "Place Pending GPUDevices, mark them Lost and record releases (on the Lease holder)")
      ->capture_default_str();
  app.add_option("--binder-retry-interval", f.binderRetry,
                 "How soon an order that could not be placed, a Lost device or a blocked release is looked at again")
      ->capture_default_str();
  app.add_option("--binder-max-conflicts", f.binderMaxConflicts,
                 "Reads and writes of one GPUDevice on 409 Conflict before the binder requeues it")
      ->capture_default_str();
  app.add_option("--vmi-placement-wait", f.vmiPlacementWait,
                 "How long the VMI webhook waits for the binder to place a VMI's device set on one node (keep the "
                 "webhook configuration's timeoutSeconds above it)")
      ->capture_default_str();
  app.add_option("--vmi-workers", f.vmiWorkers,
                 "Threads the VMI reviews run on (each waits up to --vmi-placement-wait for the binder)")
      ->capture_default_str();
  app.add_option("--vmi-attach-timeout", f.vmiAttachTimeout,
                 "How long an attachment of a VMI's devices waits for the VMI to appear before the binder undoes it "
                 "(the VMI's create was refused or failed later in admission)")
      ->capture_default_str();
  app.add_option("--enable-quota-controller", f.quota,
                 "Write add-on grants into each organization's HRQ plan-quota, project caps of project "
                 "reservations, and Organization status.quotaUsage.accelerators (on the Lease holder)")
      ->capture_default_str();
  app.add_option("--quota-resync-interval", f.quotaResync,
                 "How often the quota controller looks at every organization again (changes wake it earlier)")
      ->capture_default_str();
  app.add_option("--organization-decision-timeout", f.organizationDecisionTimeout,
                 "How long an Organization add-on review waits for its decision on the state writer before it is "
                 "refused closed")
      ->capture_default_str();
  app.add_option("--enable-pool-auditor", f.auditor,
                 "Audit every pool and publish its dashboard, findings and creation gate into the GPUDeviceClass "
                 "status (on the Lease holder). false: no gate is published, and this replica's doors evaluate "
                 "each pool's gate themselves on their snapshot (run tally-extender with --gates evaluated too)")
      ->capture_default_str();
  app.add_option("--audit-interval", f.auditInterval,
                 "How often every pool is audited and its status rewritten even when nothing changed")
      ->capture_default_str();
  app.add_option("--audit-debounce", f.auditDebounce,
                 "How long after a change the pools are audited (changes meanwhile are audited once)")
      ->capture_default_str();
  app.add_option("--audit-stale-after", f.auditStaleAfter,
                 "A cache not confirmed current for this long is a StaleCapacity finding")
      ->capture_default_str();
  app.add_option("--audit-convergence", f.auditConvergence,
                 "How long a status lagging its spec (HRQ status.hard, Organization status, plan-quota not yet "
                 "rewritten) may last: the gate is closed meanwhile and reopens by itself; beyond it the finding is an "
                 "audit failure to acknowledge")
      ->capture_default_str();
  app.add_option("--release-stuck-after", f.releaseStuckAfter,
                 "A reservation record releasing longer than this raises a ReleaseStuck Event and "
                 "tally_controller_release_stuck")
      ->capture_default_str();
  app.add_option("--alertmanager-url", f.alertmanagerUrl,
                 "Alertmanager (http://host:port) whose firing alerts with --alertmanager-pool-label close that "
                 "pool's gate; empty: no alerts are read");
  app.add_option("--alertmanager-interval", f.alertmanagerInterval, "How often Alertmanager's alerts are read")
      ->capture_default_str();
  app.add_option("--alertmanager-timeout", f.alertmanagerTimeout,
                 "Time one read of Alertmanager may take before it counts as unreachable (every gate closes)")
      ->capture_default_str();
  app.add_option("--alertmanager-pool-label", f.alertmanagerPoolLabel,
                 "Label of an alert that names the pool (GPUDeviceClass) it concerns; alerts without it are ignored")
      ->capture_default_str();
  app.add_option("--enable-usage-recorder", f.usageRecorder,
                 "Run the usage recorder (leader-only): GPU unit-seconds per holder in tally-usage-YYYYMMDD "
                 "ConfigMaps, exported at GET /usage on the ops port")
      ->capture_default_str();
  app.add_option("--usage-namespace", f.usageNamespace, "Namespace of the tally-usage-YYYYMMDD ConfigMaps")
      ->capture_default_str();
  app.add_option("--usage-interval", f.usageInterval,
                 "Longest time between two usage flushes (a change of the holders flushes sooner)")
      ->capture_default_str();
  app.add_option("--usage-check-interval", f.usageCheckInterval,
                 "How often the usage recorder compares the holders with those of its last flush")
      ->capture_default_str();
  app.add_option("--log-level", f.logLevel, "debug, info, warning or error")->capture_default_str();
  app.add_option("--log-format", f.logFormat, "json or text (logfmt)")->capture_default_str();
}

runtime::ManagerOptions managerOptions(const Flags& f, obs::Registry& registry) {
  runtime::ManagerOptions o;
  o.metrics = &registry;
  o.cacheSyncTimeout = runtime::process::durationFlag("--cache-sync-timeout", f.cacheSyncTimeout);
  if (f.leaderElect) {
    runtime::LeaderElectionConfig le;
    le.leaseName = f.leaseName;
    le.leaseNamespace = f.leaseNamespace;
    le.identity = f.identity;
    le.leaseDuration = runtime::process::durationFlag("--leader-election-lease-duration", f.leaseDuration);
    le.renewDeadline = runtime::process::durationFlag("--leader-election-renew-deadline", f.renewDeadline);
    le.retryPeriod = runtime::process::durationFlag("--leader-election-retry-period", f.retryPeriod);
    le.onNewLeader = [](const std::string& who) { logInfo("leader observed", {{"identity", who}}); };
    o.leaderElection = std::move(le);
  }
  return o;
}

admission::CertificateKeeperOptions keeperOptions(const Flags& f) {
  admission::CertificateKeeperOptions o;
  o.certFile = f.tlsCert;
  o.keyFile = f.tlsKey;
  o.secretName = f.certSecret;
  o.secretNamespace = f.serviceNamespace;
  o.serviceName = f.serviceName;
  o.serviceNamespace = f.serviceNamespace;
  o.extraDnsNames = f.certDnsNames;
  o.ipAddresses = f.certIpAddresses;
  // An empty name (--webhook-configurations "") keeps no configuration.
  auto named = [](std::vector<std::string> names) {
    std::erase_if(names, [](const std::string& n) { return n.empty(); });
    return names;
  };
  o.validatingWebhookConfigurations = named(f.validatingConfigurations);
  o.mutatingWebhookConfigurations = named(f.mutatingConfigurations);
  o.directory = f.certDir;
  o.bundlePropagation = runtime::process::durationFlag("--bundle-propagation", f.bundlePropagation);
  o.servingValidity = std::chrono::duration_cast<std::chrono::seconds>(
      runtime::process::durationFlag("--serving-cert-validity", f.servingValidity));
  o.caValidity =
      std::chrono::duration_cast<std::chrono::seconds>(runtime::process::durationFlag("--ca-validity", f.caValidity));
  o.caOverlap = runtime::process::durationFlag("--ca-overlap", f.caOverlap);
  if (o.servingValidity.count() < 3 || o.caValidity < o.servingValidity) {
    throw std::invalid_argument("--serving-cert-validity must be at least 3s and --ca-validity at least as long");
  }
  return o;
}

// Waits until `ready()` or the stop; false on the stop. The keeper announces
// nothing when its files appear, so the startup looks every 100 ms (SIGTERM
// ends the wait at once).
template <class F>
bool waitFor(std::stop_token stop, F&& ready) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  while (!ready()) {
    if (cv.wait_for(lock, stop, std::chrono::milliseconds(100), [&] { return stop.stop_requested(); })) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally-controller: Tally's admission webhooks (GPUDevice orders) and its leader-only controllers"};
  Flags f;
  addFlags(app, f);
  CLI11_PARSE(app, argc, argv);

  if (auto logging = runtime::process::setUpLogging(f.logLevel, f.logFormat); !logging) {
    std::cerr << logging.error().message << "\n";
    return 2;
  }
  if (f.tlsCert.empty() != f.tlsKey.empty()) {
    std::cerr << "TLS needs both --tls-cert-file and --tls-key-file\n";
    return 2;
  }
  if (f.webhookClientCa.empty() && !f.insecureWebhookCallers) {
    std::cerr << "tally-controller: --webhook-client-ca-file is required: the webhooks accept reviews only from the "
                 "API server's client certificate (its AdmissionConfiguration's kubeConfigFile); "
                 "--insecure-webhook-callers=true serves anyone instead\n";
    return 2;
  }
  if (!f.webhookClientCa.empty() && f.insecureWebhookCallers) {
    std::cerr << "tally-controller: --webhook-client-ca-file and --insecure-webhook-callers=true contradict each "
                 "other\n";
    return 2;
  }

  // Before any thread starts: they all inherit SIGTERM and SIGINT blocked.
  runtime::SignalStop signals;

  try {
    obs::Registry registry;
    auto informerEvents = &registry.counter("tally_controller_informer_events_total",
                                            "Watch events handed to the state writer.", {"kind"});
    auto informerStaleness = &registry.gauge("tally_controller_informer_staleness_seconds",
                                             "Seconds since the kind's watch was last heard.", {"kind"});
    auto cacheSynced =
        &registry.gauge("tally_controller_cache_synced", "1 when the kind's cache has synced.", {"kind"});
    auto& snapshotAge =
        registry.gauge("tally_controller_snapshot_age_seconds", "Age of the snapshot the webhooks decide on.").with({});
    auto& certificateLoaded = registry
                                  .gauge("tally_controller_serving_certificate_loaded",
                                         "1 when the webhook serving certificate and key are loaded.")
                                  .with({});

    auto settings = state::sourceSettings(f.source);
    if (!settings) throw std::invalid_argument(settings.error());
    const state::SourceOptions sources = settings->source;
    auto connected = runtime::process::connect({f.kubeconfig, f.context, "tally-controller/0.1"});
    if (!connected) {
      logError("cannot reach Kubernetes", {{"error", connected.error().describe()}});
      return 2;
    }
    std::shared_ptr<runtime::Client> client = std::move(connected).value();

    std::unique_ptr<controller::DeviceBinder> binder;
    if (f.binder) {
      controller::DeviceBinderOptions bo;
      bo.instance = f.identity;
      bo.retryInterval = runtime::process::durationFlag("--binder-retry-interval", f.binderRetry);
      bo.maxConflicts = std::max(1, f.binderMaxConflicts);
      bo.attachTimeout = std::chrono::duration_cast<std::chrono::seconds>(
          runtime::process::durationFlag("--vmi-attach-timeout", f.vmiAttachTimeout));
      bo.metrics = &registry;
      binder = std::make_unique<controller::DeviceBinder>(client, bo);
    }
    std::unique_ptr<controller::QuotaReconciler> quota;
    if (f.quota) {
      controller::QuotaReconcilerOptions qo;
      qo.instance = f.identity;
      qo.resync = std::chrono::duration_cast<std::chrono::milliseconds>(
          runtime::process::durationFlag("--quota-resync-interval", f.quotaResync));
      qo.metrics = &registry;
      quota = std::make_unique<controller::QuotaReconciler>(client, qo);
    }
    std::unique_ptr<controller::PoolAuditor> auditor;
    if (f.auditor) {
      controller::PoolAuditorOptions ao;
      ao.instance = f.identity;
      ao.interval = std::chrono::duration_cast<std::chrono::seconds>(
          runtime::process::durationFlag("--audit-interval", f.auditInterval));
      ao.debounce = std::chrono::duration_cast<std::chrono::milliseconds>(
          runtime::process::durationFlag("--audit-debounce", f.auditDebounce));
      ao.releaseStuckAfter = std::chrono::duration_cast<std::chrono::seconds>(
          runtime::process::durationFlag("--release-stuck-after", f.releaseStuckAfter));
      ao.audit.staleAfterSeconds = std::chrono::duration_cast<std::chrono::seconds>(
                                       runtime::process::durationFlag("--audit-stale-after", f.auditStaleAfter))
                                       .count();
      ao.audit.convergenceSeconds = std::chrono::duration_cast<std::chrono::seconds>(
                                        runtime::process::durationFlag("--audit-convergence", f.auditConvergence))
                                        .count();
      ao.metrics = &registry;
      auditor = std::make_unique<controller::PoolAuditor>(client, ao);
    }
    state::Writer::Options writerOptions;
    writerOptions.publishInterval = settings->publishInterval;
    writerOptions.tenancy = settings->tenancy;
    writerOptions.watched = state::watchedKinds(sources);
    if (binder) writerOptions.extensions.push_back(binder.get());
    if (quota) writerOptions.extensions.push_back(quota.get());
    if (auditor) writerOptions.extensions.push_back(auditor.get());
    if (!auditor) {
      // No auditor publishes a gate: the doors evaluate the same gate function
      // themselves on every snapshot (model::GateSource::Evaluated).
      writerOptions.gates = model::GateSource::Evaluated;
      writerOptions.gateAudit.staleAfterSeconds =
          std::chrono::duration_cast<std::chrono::seconds>(
              runtime::process::durationFlag("--audit-stale-after", f.auditStaleAfter))
              .count();
    }
    controller::VmiWebhookOptions vo;
    vo.placementWait = runtime::process::durationFlag("--vmi-placement-wait", f.vmiPlacementWait);
    vo.attachTimeout = std::chrono::duration_cast<std::chrono::seconds>(
        runtime::process::durationFlag("--vmi-attach-timeout", f.vmiAttachTimeout));
    vo.maxConflicts = std::max(1, f.binderMaxConflicts);
    vo.metrics = &registry;
    controller::VmiWebhook vmiWebhook(client, vo);
    writerOptions.extensions.push_back(&vmiWebhook);
    state::Writer writer(writerOptions);
    vmiWebhook.readFrom(writer.snapshots());
    std::unique_ptr<controller::AlertSource> alerts;
    if (!f.alertmanagerUrl.empty()) {
      controller::AlertSourceOptions so;
      so.url = f.alertmanagerUrl;
      so.interval = std::chrono::duration_cast<std::chrono::milliseconds>(
          runtime::process::durationFlag("--alertmanager-interval", f.alertmanagerInterval));
      so.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
          runtime::process::durationFlag("--alertmanager-timeout", f.alertmanagerTimeout));
      so.poolLabel = f.alertmanagerPoolLabel;
      so.metrics = &registry;
      if (auditor) so.changed = [a = auditor.get()] { a->wakeAll(); };
      alerts = std::make_unique<controller::AlertSource>(writer, so);
    }
    std::unique_ptr<controller::UsageRecorder> usage;
    if (f.usageRecorder) {
      controller::UsageRecorderOptions uo;
      uo.ns = f.usageNamespace;
      uo.interval = runtime::process::durationFlag("--usage-interval", f.usageInterval);
      uo.checkInterval = runtime::process::durationFlag("--usage-check-interval", f.usageCheckInterval);
      uo.metrics = &registry;
      usage = std::make_unique<controller::UsageRecorder>(client, writer, uo);
    }
    state::Informers watches(client, writer, sources,
                             state::InformerMetrics{informerEvents, informerStaleness, cacheSynced});

    admission::CertificateKeeper keeper(client, keeperOptions(f));
    runtime::Manager manager(client, managerOptions(f, registry));
    keeper.attach(manager);
    // Leader-only controllers join the manager before run().
    if (binder) {
      binder->readFrom(writer.snapshots());
      binder->attach(manager);
    }
    if (quota) {
      quota->readFrom(writer.snapshots());
      quota->attach(manager);
    }
    if (auditor) {
      auditor->readFrom(writer.snapshots());
      auditor->attach(manager);
    }
    if (usage) usage->attach(manager);

    // VMI reviews wait for the binder: they run here, off the server's threads.
    boost::asio::thread_pool vmiPool(std::max(1u, f.vmiWorkers));
    // GET /options reviews its caller with the API server: off the server's threads too.
    boost::asio::thread_pool catalogPool(std::max(1u, f.catalogWorkers));
    // Acknowledgements ask the API server who holds a review role: off the server's threads too.
    boost::asio::thread_pool acknowledgementPool(1);
    controller::SubjectAccessRoles acknowledgementRoles(client);
    controller::KubernetesAccessReviewer accessReviews(client);
    controller::CachedAccessReviewer catalogAccess(
        accessReviews, std::chrono::duration_cast<std::chrono::milliseconds>(
                           runtime::process::durationFlag("--catalog-review-ttl", f.catalogReviewTtl)));
    auto& catalogRequests = controller::catalogRequestMetric(registry);
    auto& webhookRejected = registry.counter(
        "tally_controller_webhook_rejected_total",
        "Requests to the webhook port refused before any handler: unauthenticated (no client certificate), "
        "forbidden (a certificate not allowed), connection_limit, timeout, body_too_large, malformed_http, ...",
        {"kind"});

    std::atomic<bool> serving{false};
    registry.onScrape([&] {
      auto snap = writer.snapshots().read();
      snapshotAge.set(std::chrono::duration<double>(std::chrono::steady_clock::now() - snap->publishedAt).count());
      certificateLoaded.set(keeper.ready() ? 1 : 0);
    });

    writer.start();
    watches.start();
    if (alerts) alerts->start();

    http::ServerOptions opsOptions;
    opsOptions.address = f.opsAddress;
    opsOptions.port = f.opsPort;
    opsOptions.threads = 1;
    opsOptions.threadName = "tally-ops";
    opsOptions.maxConnections = f.maxConnections;
    http::Router ops;
    http::addOperationRoutes(ops, {.readiness =
                                       [&] {
                                         auto snap = writer.snapshots().read();
                                         return controller::readiness(*snap, {keeper.ready(), serving.load()});
                                       },
                                   .metrics = [&registry] { return registry.render(); }});
    // GET /usage reviews its caller with the API server and reads the
    // checkpoints: off the ops thread, which answers the probes.
    boost::asio::thread_pool usagePool(1);
    controller::KubernetesAccessReviewer usageReviews(client, controller::usageAccessRule());
    controller::CachedAccessReviewer usageAccess(
        usageReviews, std::chrono::duration_cast<std::chrono::milliseconds>(
                          runtime::process::durationFlag("--catalog-review-ttl", f.catalogReviewTtl)));
    if (usage) {
      controller::addUsageRoute(
          ops, *usage, writer.snapshots(),
          {&usageAccess, [&usagePool](std::function<void()> work) { boost::asio::post(usagePool, std::move(work)); }});
    }
    http::Server opsServer(opsOptions, std::move(ops));
    opsServer.start();

    std::optional<runtime::Status> managerResult;
    std::stop_source managerStop;
    std::jthread managerThread([&] {
      managerResult = manager.run(managerStop.get_token());
      if (!*managerResult) {
        logError("controller manager stopped", {{"error", managerResult->error().describe()}});
        ::kill(::getpid(), SIGTERM);
      }
    });

    std::unique_ptr<http::Server> server;
    if (waitFor(signals.token(), [&] { return keeper.ready(); })) {
      http::ServerOptions so;
      so.address = f.webhookAddress;
      so.port = f.webhookPort;
      so.threads = f.threads;
      so.threadName = "tally-webhook";
      so.readTimeout = runtime::process::durationFlag("--read-timeout", f.readTimeout);
      so.idleTimeout = runtime::process::durationFlag("--idle-timeout", f.idleTimeout);
      so.maxConnections = f.maxConnections;
      so.tls = keeper.tlsFiles();
      if (!f.webhookClientCa.empty()) {
        so.tls->clients = http::ClientCertificates{f.webhookClientCa, f.webhookAllowedClients};
      }
      http::Router webhooks;
      admission::WebhookOptions wo;
      wo.metrics = std::make_shared<admission::WebhookMetrics>(registry);
      wo.caller = f.insecureWebhookCallers ? http::Caller::Anyone : http::Caller::VerifiedClient;
      addWebhook(webhooks, std::string(controller::kGpuDeviceWebhookPath), "gpudevices",
                 controller::gpuDeviceWebhook(writer.snapshots(),
                                              {f.controllerIdentity, &controller::gpuDeviceRefusalMetric(registry)}),
                 wo);
      controller::PodWebhookOptions podOptions = controller::podWebhookMetrics(registry);
      podOptions.placement.schedulers = f.gpuSchedulers;
      addWebhook(webhooks, std::string(controller::kLauncherPodWebhookPath),
                 std::string(controller::kLauncherPodWebhookName),
                 controller::launcherPodWebhook(writer.snapshots(), podOptions), wo);
      addWebhook(webhooks, std::string(controller::kGpuPodWebhookPath), std::string(controller::kGpuPodWebhookName),
                 controller::gpuPodWebhook(writer.snapshots(), podOptions), wo);
      addWebhook(webhooks, std::string(controller::kGpuPodRouteWebhookPath),
                 std::string(controller::kGpuPodRouteWebhookName),
                 controller::gpuPodRouteWebhook(writer.snapshots(), podOptions), wo);
      controller::OrganizationWebhookOptions oo;
      oo.decisionTimeout = std::chrono::duration_cast<std::chrono::milliseconds>(
          runtime::process::durationFlag("--organization-decision-timeout", f.organizationDecisionTimeout));
      oo.refusals = &controller::organizationRefusalMetric(registry);
      addWebhook(webhooks, std::string(controller::kOrganizationWebhookPath),
                 std::string(controller::kOrganizationWebhookName),
                 controller::organizationWebhook(writer.snapshots(), writer, oo), wo);
      admission::WebhookOptions classRoute = wo;
      classRoute.run = [&acknowledgementPool](std::function<void()> review) {
        boost::asio::post(acknowledgementPool, std::move(review));
      };
      addWebhook(webhooks, std::string(controller::kClassWebhookPath), std::string(controller::kClassWebhookName),
                 controller::classWebhook(acknowledgementRoles), classRoute);
      admission::WebhookOptions vmiRoute = wo;
      vmiRoute.run = [&vmiPool](std::function<void()> review) { boost::asio::post(vmiPool, std::move(review)); };
      addWebhook(webhooks, std::string(controller::kVmiWebhookPath), "virtualmachineinstances", vmiWebhook.handler(),
                 vmiRoute);
      webhooks.add("GET", std::string(controller::kOptionsPath), "options",
                   controller::catalogEndpoint(
                       writer.snapshots(), catalogAccess,
                       {[&catalogPool](std::function<void()> work) { boost::asio::post(catalogPool, std::move(work)); },
                        &catalogRequests}));
      http::Observer webhookObserver;
      webhookObserver.onRejected = [rejected = &webhookRejected](std::string_view kind) {
        rejected->with({std::string(kind)}).inc();
      };
      server = std::make_unique<http::Server>(so, std::move(webhooks), std::move(webhookObserver));
      server->start();
      serving = true;
      logInfo("tally-controller serving", {{"webhookPort", server->port()},
                                           {"opsPort", opsServer.port()},
                                           {"identity", f.identity},
                                           {"generatedCertificate", keeper.managing()}});
      signals.wait();
    }
    logInfo("shutting down", {{"signal", signals.received()}});
    serving = false;
    if (server) server->stop();
    vmiPool.join();
    catalogPool.join();
    usagePool.join();
    acknowledgementPool.join();
    managerStop.request_stop();
    managerThread.join();
    if (alerts) alerts->stop();
    watches.stop();
    writer.stop();
    opsServer.stop();
    if (managerResult && !*managerResult) return 1;
  } catch (const std::exception& e) {
    logError("tally-controller failed", {{"error", e.what()}});
    return 1;
  }
  return 0;
}
