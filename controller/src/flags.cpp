#include "flags.hpp"

#include <algorithm>

namespace tally::controller {

namespace process = runtime::process;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

void addWebhookFlags(CLI::App& app, Flags& f) {
  app.add_option("--webhook-bind-address", f.webhookAddress, "Address of the HTTPS admission webhook listener")
      ->capture_default_str();
  app.add_option("--webhook-port", f.webhookPort, "Port of the HTTPS webhooks (/validate/gpudevices)")
      ->capture_default_str();
  app.add_option("--ops-bind-address", f.opsAddress, "Address of the plain-HTTP /healthz, /readyz, /metrics listener")
      ->capture_default_str();
  app.add_option("--ops-port", f.opsPort, "Port of /healthz, /readyz, /metrics")->capture_default_str();
  app.add_option("--catalog-review-ttl", f.catalogReviewTtl,
                 "How long GET /options remembers a token's TokenReview/SubjectAccessReview decision per namespace")
      ->capture_default_str();
  app.add_option("--catalog-workers", f.catalogWorkers,
                 "Threads that review GET /options callers (the reviews call the API server)")
      ->capture_default_str();
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
  app.add_option("--controller-identity", f.controllerIdentity,
                 "The only user allowed to change a GPUDevice's status (Tally's service account)")
      ->capture_default_str();
  app.add_option("--gpu-schedulers", f.gpuSchedulers,
                 "Scheduler profiles whose kube-scheduler calls tally-extender (comma-separated); the gpu-pods "
                 "mutating webhook points every GPU pod at the first, the validating one refuses a GPU pod naming "
                 "any other")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--vmi-placement-wait", f.vmiPlacementWait,
                 "How long the VMI webhook waits for the binder to place a VMI's device set on one node (keep the "
                 "webhook configuration's timeoutSeconds above it)")
      ->capture_default_str();
  app.add_option("--vmi-workers", f.vmiWorkers,
                 "Threads the VMI reviews run on (each waits up to --vmi-placement-wait for the binder)")
      ->capture_default_str();
  app.add_option("--organization-decision-timeout", f.organizationDecisionTimeout,
                 "How long an Organization add-on review waits for its decision on the state writer before it is "
                 "refused closed")
      ->capture_default_str();
  app.add_option("--organization-settle", f.organizationSettle,
                 "How long an Organization add-on review whose answer only waits on this replica's caches (an "
                 "unknown pool equation, e.g. a plan-quota HRQ created a moment ago) is decided again before it is "
                 "refused; 0s answers the first decision")
      ->capture_default_str();
}

void addCertificateFlags(CLI::App& app, Flags& f) {
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
}

void addLeaderFlags(CLI::App& app, Flags& f) {
  state::addSourceFlags(app, f.source, "the webhooks");
  app.add_option("--cache-sync-timeout", f.cacheSyncTimeout,
                 "How long the caches may take to sync before the start fails naming them: every watched kind of the "
                 "state (GPU work begins only on a complete view) and the certificate Secret and webhook "
                 "configurations")
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
}

void addAuditFlags(CLI::App& app, Flags& f) {
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
}

}  // namespace

void addFlags(CLI::App& app, Flags& f) {
  process::addProcessFlags(app, f.process);
  process::addServingFlags(app, f.serving, "the admission webhooks");
  app.get_option("--tls-cert-file")
      ->description(
          "Serving certificate chain (PEM) of the webhooks, used as is and re-read when it changes; empty: the "
          "leader generates one into --cert-secret");
  addWebhookFlags(app, f);
  addCertificateFlags(app, f);
  process::addLeaderElectionFlags(app, f.leader);
  addLeaderFlags(app, f);
  addAuditFlags(app, f);
}

std::string contradiction(const Flags& f) {
  if (f.serving.tlsCert.empty() != f.serving.tlsKey.empty()) {
    return "TLS needs both --tls-cert-file and --tls-key-file";
  }
  if (f.webhookClientCa.empty() && !f.insecureWebhookCallers) {
    return "--webhook-client-ca-file is required: the webhooks accept reviews only from the API server's client "
           "certificate (its AdmissionConfiguration's kubeConfigFile); --insecure-webhook-callers=true serves anyone "
           "instead";
  }
  if (!f.webhookClientCa.empty() && f.insecureWebhookCallers) {
    return "--webhook-client-ca-file and --insecure-webhook-callers=true contradict each other";
  }
  return {};
}

runtime::ManagerOptions managerOptions(const Flags& f, observability::Registry& registry) {
  runtime::ManagerOptions o;
  o.metrics = &registry;
  o.cacheSyncTimeout = process::durationFlag("--cache-sync-timeout", f.cacheSyncTimeout);
  o.leaderElection = process::leaderElection(f.leader);
  return o;
}

runtime::admission::CertificateKeeperOptions keeperOptions(const Flags& f) {
  runtime::admission::CertificateKeeperOptions o;
  o.certFile = f.serving.tlsCert;
  o.keyFile = f.serving.tlsKey;
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
  o.bundlePropagation = process::durationFlag("--bundle-propagation", f.bundlePropagation);
  o.servingValidity = duration<seconds>("--serving-cert-validity", f.servingValidity);
  o.caValidity = duration<seconds>("--ca-validity", f.caValidity);
  o.caOverlap = process::durationFlag("--ca-overlap", f.caOverlap);
  if (o.servingValidity.count() < 3 || o.caValidity < o.servingValidity) {
    throw std::invalid_argument("--serving-cert-validity must be at least 3s and --ca-validity at least as long");
  }
  return o;
}

DeviceBinderOptions binderOptions(const Flags& f, observability::Registry& registry) {
  DeviceBinderOptions o;
  o.instance = f.leader.identity;
  o.retryInterval = process::durationFlag("--binder-retry-interval", f.binderRetry);
  o.maxConflicts = std::max(1, f.binderMaxConflicts);
  o.attachTimeout = duration<seconds>("--vmi-attach-timeout", f.vmiAttachTimeout);
  o.metrics = &registry;
  return o;
}

QuotaReconcilerOptions quotaOptions(const Flags& f, observability::Registry& registry) {
  QuotaReconcilerOptions o;
  o.instance = f.leader.identity;
  o.resync = duration<milliseconds>("--quota-resync-interval", f.quotaResync);
  o.metrics = &registry;
  return o;
}

PoolAuditorOptions auditorOptions(const Flags& f, observability::Registry& registry) {
  PoolAuditorOptions o;
  o.instance = f.leader.identity;
  o.interval = duration<seconds>("--audit-interval", f.auditInterval);
  o.debounce = duration<milliseconds>("--audit-debounce", f.auditDebounce);
  o.releaseStuckAfter = duration<seconds>("--release-stuck-after", f.releaseStuckAfter);
  o.audit.staleAfterSeconds = duration<seconds>("--audit-stale-after", f.auditStaleAfter).count();
  o.audit.convergenceSeconds = duration<seconds>("--audit-convergence", f.auditConvergence).count();
  o.metrics = &registry;
  return o;
}

VmiWebhookOptions vmiOptions(const Flags& f, observability::Registry& registry) {
  VmiWebhookOptions o;
  o.placementWait = process::durationFlag("--vmi-placement-wait", f.vmiPlacementWait);
  o.attachTimeout = duration<seconds>("--vmi-attach-timeout", f.vmiAttachTimeout);
  o.maxConflicts = std::max(1, f.binderMaxConflicts);
  o.metrics = &registry;
  return o;
}

AlertSourceOptions alertOptions(const Flags& f, observability::Registry& registry) {
  AlertSourceOptions o;
  o.url = f.alertmanagerUrl;
  o.interval = duration<milliseconds>("--alertmanager-interval", f.alertmanagerInterval);
  o.timeout = duration<milliseconds>("--alertmanager-timeout", f.alertmanagerTimeout);
  o.poolLabel = f.alertmanagerPoolLabel;
  o.metrics = &registry;
  return o;
}

UsageRecorderOptions usageOptions(const Flags& f, observability::Registry& registry) {
  UsageRecorderOptions o;
  o.ns = f.usageNamespace;
  o.interval = process::durationFlag("--usage-interval", f.usageInterval);
  o.checkInterval = process::durationFlag("--usage-check-interval", f.usageCheckInterval);
  o.metrics = &registry;
  return o;
}

OrganizationWebhookOptions organizationOptions(const Flags& f) {
  OrganizationWebhookOptions o;
  o.decisionTimeout = duration<milliseconds>("--organization-decision-timeout", f.organizationDecisionTimeout);
  o.settle = duration<milliseconds>("--organization-settle", f.organizationSettle);
  return o;
}

state::Writer::Options writerOptions(const Flags& f, const state::SourceSettings& settings) {
  state::Writer::Options o;
  o.publishInterval = settings.publishInterval;
  o.tenancy = settings.tenancy;
  o.watched = state::watchedKinds(settings.source);
  if (!f.auditor) {
    // No auditor publishes a gate: the doors evaluate the same gate function
    // themselves on every snapshot (model::GateSource::Evaluated).
    o.gates = model::GateSource::Evaluated;
    o.gateAudit.staleAfterSeconds = duration<seconds>("--audit-stale-after", f.auditStaleAfter).count();
  }
  return o;
}

}  // namespace tally::controller
