#include "replica.hpp"

#include <boost/asio/post.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tally/common/log.hpp"
#include "tally/controller/claim_webhook.hpp"
#include "tally/controller/gpu_device_webhook.hpp"
#include "tally/controller/pod_webhooks.hpp"
#include "tally/controller/readiness.hpp"
#include "tally/runtime/admission/webhook.hpp"
#include "tally/runtime/http/operation_routes.hpp"

namespace tally::controller {

namespace http = runtime::http;
namespace admission = runtime::admission;
namespace obs = observability;
using std::chrono::milliseconds;

namespace {

state::SourceSettings settingsOf(const Flags& f) {
  auto settings = state::sourceSettings(f.source);
  if (!settings) throw std::invalid_argument(settings.error());
  return std::move(settings).value();
}

// Runs work on a pool: the routes that wait or call the API server.
std::function<void(std::function<void()>)> on(boost::asio::thread_pool& pool) {
  return [&pool](std::function<void()> work) { boost::asio::post(pool, std::move(work)); };
}

}  // namespace

// The HTTPS webhook listener. It starts once the certificate keeper has the
// serving certificate on disk (a standby reads the leader's, a leader may
// generate one first), on a thread of its own so the manager's start goes on;
// its stop drains the listener, then the reviews still queued on the pools.
class Replica::WebhookListener final : public runtime::Runnable {
 public:
  explicit WebhookListener(Replica& replica) : r_(replica) {}
  std::string name() const override { return "webhook listener"; }
  void start() override {
    waiter_ = std::jthread([this](std::stop_token stop) {
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock lock(mu);
      // The keeper announces nothing when its files appear: look every 100 ms.
      while (!r_.keeper_.ready()) {
        if (cv.wait_for(lock, stop, milliseconds(100), [&] { return stop.stop_requested(); })) return;
      }
      serve();
    });
  }
  void stop() override {
    waiter_ = {};  // requests the stop and joins
    r_.serving_ = false;
    if (server_) server_->stop();
    r_.vmiPool_.join();
    r_.catalogPool_.join();
    r_.acknowledgementPool_.join();
  }

 private:
  void serve() {
    const Flags& f = r_.f_;
    http::ServerOptions so = runtime::process::serverOptions(f.serving);
    so.address = f.webhookAddress;
    so.port = f.webhookPort;
    so.threadName = "tally-webhook";
    so.tls = r_.keeper_.tlsFiles();
    if (!f.webhookClientCa.empty())
      so.tls->clients = http::ClientCertificates{f.webhookClientCa, f.webhookAllowedClients};
    auto& rejected = r_.registry_.counter(
        "tally_controller_webhook_rejected_total",
        "Requests to the webhook port refused before any handler: unauthenticated (no client certificate), "
        "forbidden (a certificate not allowed), connection_limit, timeout, body_too_large, malformed_http, ...",
        {"kind"});
    http::Observer observer;
    observer.onRejected = [&rejected](std::string_view kind) { rejected.with({std::string(kind)}).inc(); };
    server_ = std::make_unique<http::Server>(so, r_.webhookRoutes(), std::move(observer));
    server_->start();
    r_.serving_ = true;
    logInfo("tally-controller serving", {{"webhookPort", server_->port()},
                                         {"opsPort", r_.ops_ ? r_.ops_->port() : 0},
                                         {"identity", f.leader.identity},
                                         {"generatedCertificate", r_.keeper_.managing()}});
  }

  Replica& r_;
  std::unique_ptr<http::Server> server_;
  std::jthread waiter_;
};

Replica::Replica(const Flags& flags, obs::Registry& registry, std::shared_ptr<runtime::Client> client)
    : f_(flags),
      registry_(registry),
      client_(std::move(client)),
      settings_(settingsOf(flags)),
      keeper_(client_, keeperOptions(flags)),
      manager_(client_, managerOptions(flags, registry)),
      vmiPool_(std::max(1u, flags.vmiWorkers)),
      catalogPool_(std::max(1u, flags.catalogWorkers)),
      acknowledgementPool_(1),
      usagePool_(1),
      acknowledgementRoles_(client_),
      catalogReviews_(client_),
      usageReviews_(client_, usageAccessRule()),
      catalogAccess_(catalogReviews_, duration<milliseconds>("--catalog-review-ttl", flags.catalogReviewTtl)),
      usageAccess_(usageReviews_, duration<milliseconds>("--catalog-review-ttl", flags.catalogReviewTtl)) {
  buildLeaderParts();
  state::Writer::Options wo = writerOptions(f_, settings_);
  for (state::Observer* o : std::initializer_list<state::Observer*>{binder_.get(), quota_.get(), auditor_.get()}) {
    if (o) wo.observers.push_back(o);
  }
  vmiWebhook_ = std::make_unique<VmiWebhook>(client_, vmiOptions(f_, registry_));
  wo.observers.push_back(vmiWebhook_.get());
  claimWebhook_ = std::make_unique<ClaimWebhook>();
  wo.observers.push_back(claimWebhook_.get());
  wo.observers.push_back(&organizationChanges_);
  writer_ = std::make_unique<state::Writer>(std::move(wo));
  vmiWebhook_->readFrom(writer_->snapshots());
  claimWebhook_->readFrom(writer_->snapshots());
  if (binder_) binder_->readFrom(writer_->snapshots());
  if (quota_) quota_->readFrom(writer_->snapshots());
  if (auditor_) auditor_->readFrom(writer_->snapshots());
  if (!f_.alertmanagerUrl.empty()) {
    AlertSourceOptions ao = alertOptions(f_, registry_);
    if (auditor_) ao.changed = [a = auditor_.get()] { a->wakeAll(); };
    alerts_ = std::make_unique<AlertSource>(*writer_, ao);
  }
  if (f_.usageRecorder) usage_ = std::make_unique<UsageRecorder>(client_, *writer_, usageOptions(f_, registry_));
  watches_ = std::make_unique<state::Informers>(client_, *writer_, settings_.source, &registry_);
  addToManager();
}

Replica::~Replica() = default;

void Replica::buildLeaderParts() {
  if (f_.binder) binder_ = std::make_unique<DeviceBinder>(client_, binderOptions(f_, registry_));
  if (f_.quota) quota_ = std::make_unique<QuotaReconciler>(client_, quotaOptions(f_, registry_));
  if (f_.auditor) auditor_ = std::make_unique<PoolAuditor>(client_, auditorOptions(f_, registry_));
}

void Replica::addToManager() {
  auto& snapshotAge =
      registry_.gauge("tally_controller_snapshot_age_seconds", "Age of the snapshot the webhooks decide on.").with({});
  auto& certificateLoaded = registry_
                                .gauge("tally_controller_serving_certificate_loaded",
                                       "1 when the webhook serving certificate and key are loaded.")
                                .with({});
  registry_.onScrape([this, &snapshotAge, &certificateLoaded] {
    auto snap = writer_->snapshots().read();
    snapshotAge.set(std::chrono::duration<double>(std::chrono::steady_clock::now() - snap->publishedAt).count());
    certificateLoaded.set(keeper_.ready() ? 1 : 0);
  });

  manager_.add(runtime::Stage::Serving, runtime::runnable(
                                            "ops listener",
                                            [this] {
                                              ops_ = opsServer();
                                              ops_->start();
                                            },
                                            [this] {
                                              ops_->stop();
                                              usagePool_.join();
                                            }));
  // The state: a snapshot is ready once every watched kind has synced.
  manager_.add(runtime::Stage::Caches, runtime::runnable(
                                           "state writer", [this] { writer_->start(); }, [this] { writer_->stop(); },
                                           [this] { return writer_->snapshots().read()->ready(); }));
  manager_.add(runtime::Stage::Caches,
               runtime::runnable(
                   "state informers", [this] { watches_->start(); }, [this] { watches_->stop(); }));
  if (alerts_) {
    manager_.add(runtime::Stage::Caches,
                 runtime::runnable(
                     "alertmanager source", [this] { alerts_->start(); }, [this] { alerts_->stop(); }));
  }
  keeper_.attach(manager_);
  // Leader-only controllers: each joins the manager as a leader-only controller.
  if (binder_) binder_->attach(manager_);
  if (quota_) quota_->attach(manager_);
  if (auditor_) auditor_->attach(manager_);
  if (usage_) usage_->attach(manager_);
  webhooks_ = std::make_unique<WebhookListener>(*this);
  manager_.add(runtime::Stage::Replica, *webhooks_);
}

std::unique_ptr<http::Server> Replica::opsServer() {
  http::ServerOptions o;
  o.address = f_.opsAddress;
  o.port = f_.opsPort;
  o.threads = 1;
  o.threadName = "tally-ops";
  o.maxConnections = f_.serving.maxConnections;
  http::Router ops;
  http::addOperationRoutes(ops, {.readiness =
                                     [this] {
                                       auto snap = writer_->snapshots().read();
                                       return readiness(*snap, {keeper_.ready(), serving_.load()});
                                     },
                                 .metrics = [this] { return registry_.render(); }});
  // GET /usage reviews its caller with the API server and reads the
  // checkpoints: off the ops thread, which answers the probes.
  if (usage_) addUsageRoute(ops, *usage_, writer_->snapshots(), {&usageAccess_, on(usagePool_)});
  return std::make_unique<http::Server>(o, std::move(ops));
}

http::Router Replica::webhookRoutes() {
  const auto& snapshots = writer_->snapshots();
  http::Router routes;
  admission::WebhookOptions wo;
  wo.metrics = std::make_shared<admission::WebhookMetrics>(registry_);
  wo.caller = f_.insecureWebhookCallers ? http::Caller::Anyone : http::Caller::VerifiedClient;
  addWebhook(routes, std::string(kGpuDeviceWebhookPath), "gpudevices",
             gpuDeviceWebhook(snapshots, {f_.controllerIdentity}), wo);
  PodWebhookOptions podOptions = podWebhookMetrics(registry_);
  podOptions.placement.schedulers = f_.gpuSchedulers;
  addWebhook(routes, std::string(kLauncherPodWebhookPath), std::string(kLauncherPodWebhookName),
             launcherPodWebhook(snapshots, podOptions), wo);
  addWebhook(routes, std::string(kGpuPodWebhookPath), std::string(kGpuPodWebhookName),
             gpuPodWebhook(snapshots, podOptions), wo);
  addWebhook(routes, std::string(kGpuPodRouteWebhookPath), std::string(kGpuPodRouteWebhookName),
             gpuPodRouteWebhook(snapshots, podOptions), wo);
  addWebhook(routes, std::string(kClaimWebhookPath), std::string(kClaimWebhookName), claimWebhook_->handler(), wo);
  addWebhook(routes, std::string(kOrganizationWebhookPath), std::string(kOrganizationWebhookName),
             organizationWebhook(snapshots, *writer_, organizationChanges_, organizationOptions(f_)), wo);
  // Acknowledgements ask the API server who holds a review role; VMI reviews
  // wait for the binder: both off the listener's threads.
  admission::WebhookOptions classRoute = wo;
  classRoute.run = on(acknowledgementPool_);
  addWebhook(routes, std::string(kClassWebhookPath), std::string(kClassWebhookName),
             classWebhook(acknowledgementRoles_), classRoute);
  admission::WebhookOptions vmiRoute = wo;
  vmiRoute.run = on(vmiPool_);
  addWebhook(routes, std::string(kVmiWebhookPath), "virtualmachineinstances", vmiWebhook_->handler(), vmiRoute);
  // GET /options reviews its caller with the API server: off the listener's threads too.
  routes.add("GET", std::string(kOptionsPath), "options",
             catalogEndpoint(snapshots, catalogAccess_, {on(catalogPool_), &catalogRequestMetric(registry_)}));
  return routes;
}

runtime::Status Replica::run(std::stop_token stop) { return manager_.run(stop); }

}  // namespace tally::controller
