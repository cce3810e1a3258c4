#pragma once
// One replica of tally-controller: every part it runs, built from the flags
// and handed to the manager in its stages (runtime/manager.hpp), which starts
// and stops them in one order:
//   Serving  the ops listener (/healthz, /readyz, /metrics, /usage);
//   Caches   the state writer, its informers and the Alertmanager source (the
//            doors and the leader's work begin on a complete view), the
//            certificate keeper's Secret and webhook configurations;
//   Leader   the binder, the quota controller, the pool auditor, the usage
//            recorder and the keeper's rotation, while this replica leads;
//   Replica  the webhook listener, once the serving certificate is on disk.
// A stop drains the webhook listener (and the reviews queued on its worker
// pools) before the leader's work stops and the Lease is released.

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <memory>

#include "flags.hpp"
#include "tally/controller/catalog_endpoint.hpp"
#include "tally/controller/claim_webhook.hpp"
#include "tally/controller/class_webhook.hpp"
#include "tally/controller/organization_webhook.hpp"
#include "tally/runtime/http/server.hpp"
#include "tally/state/informers.hpp"

namespace tally::controller {

class Replica {
 public:
  Replica(const Flags& flags, observability::Registry& registry, std::shared_ptr<runtime::Client> client);
  ~Replica();
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  // Runs until `stop`; an error when the manager could not (caches that did
  // not sync, naming them, or leader election that could not start).
  runtime::Status run(std::stop_token stop);

 private:
  class WebhookListener;
  void buildLeaderParts();
  void addToManager();
  std::unique_ptr<runtime::http::Server> opsServer();
  runtime::http::Router webhookRoutes();

  const Flags& f_;
  observability::Registry& registry_;
  std::shared_ptr<runtime::Client> client_;
  state::SourceSettings settings_;

  std::unique_ptr<DeviceBinder> binder_;
  std::unique_ptr<QuotaReconciler> quota_;
  std::unique_ptr<PoolAuditor> auditor_;
  std::unique_ptr<VmiWebhook> vmiWebhook_;
  std::unique_ptr<ClaimWebhook> claimWebhook_;
  CacheChanges organizationChanges_;  // wakes Organization reviews waiting on the caches
  std::unique_ptr<state::Writer> writer_;
  std::unique_ptr<AlertSource> alerts_;
  std::unique_ptr<UsageRecorder> usage_;
  std::unique_ptr<state::Informers> watches_;
  runtime::admission::CertificateKeeper keeper_;
  runtime::Manager manager_;

  // Reviews that wait or call the API server run here, off the listeners' threads.
  boost::asio::thread_pool vmiPool_, catalogPool_, acknowledgementPool_, usagePool_;
  SubjectAccessRoles acknowledgementRoles_;
  KubernetesAccessReviewer catalogReviews_, usageReviews_;
  CachedAccessReviewer catalogAccess_, usageAccess_;
  std::atomic<bool> serving_{false};
  std::unique_ptr<runtime::http::Server> ops_;
  std::unique_ptr<WebhookListener> webhooks_;
};

}  // namespace tally::controller
