#pragma once
// An admission webhook as a route of runtime/http's server: POST <path> takes
// an AdmissionReview, the handler decides, the answer goes back as an
// AdmissionReview with the request's uid. A review that cannot be decoded is
// answered 400 with the decoder's message and counted; a handler that throws
// is answered 500 with the exception's message (the server keeps serving).
//
// The handler runs on the server's thread and must answer well within the
// webhook's timeoutSeconds. It is given request.dryRun: on a dry run it must
// decide exactly as it otherwise would and leave no trace (no write, no
// reservation, no event), which is what sideEffects: NoneOnDryRun declares.
//
// Metrics (label webhook = the name given here):
//   tally_webhook_requests_total{webhook,operation,result}  result: allowed | refused | error
//   tally_webhook_malformed_reviews_total{webhook}
//   tally_webhook_duration_seconds{webhook}                  decode, decide and encode

#include <functional>
#include <memory>
#include <string>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/http/server.hpp"

namespace tally::runtime::admission {

using WebhookHandler = std::function<AdmissionResponse(const AdmissionRequest&)>;

// The webhook families of one registry; share one between the webhooks of a process.
class WebhookMetrics {
 public:
  explicit WebhookMetrics(observability::Registry& registry);

  observability::Counter& requests(const std::string& webhook, Operation op, std::string_view result);
  observability::Counter& malformed(const std::string& webhook);
  observability::Histogram& duration(const std::string& webhook);

 private:
  observability::Family<observability::Counter>* requests_;
  observability::Family<observability::Counter>* malformed_;
  observability::Family<observability::Histogram>* duration_;
};

struct WebhookOptions {
  DecodeOptions decode;
  std::shared_ptr<WebhookMetrics> metrics;  // null: not measured
  // Where the review runs: empty, on the server's thread that read it. A
  // handler that waits (the VMI webhook waits for the binder, and its writes
  // make the API server call this same server) must be handed elsewhere, or
  // the reviews it causes could queue behind it on its thread.
  std::function<void(std::function<void()>)> run;
  // Who may send reviews: the API server's verified client certificate
  // (its admission configuration's kubeConfigFile), or anyone.
  http::Caller caller = http::Caller::VerifiedClient;
};

// Registers POST `path` (route label `name`) on the router.
void addWebhook(http::Router& router, std::string path, std::string name, WebhookHandler handler,
                WebhookOptions options = {});

// The handling behind the route, for tests: the HTTP answer to one body.
http::Response answerReview(const std::string& name, const WebhookHandler& handler, std::string_view body,
                            const WebhookOptions& options);

}  // namespace tally::runtime::admission
