#pragma once
// An admission webhook as a route of runtime/http's server: POST <path> takes
// an AdmissionReview, the handler decides, the answer goes back as an
// AdmissionReview with the request's uid. A review that cannot be decoded is
// answered 400 with the decoder's message and counted; a handler that throws
// is answered 500 with the exception's message (the server keeps serving).
//
// The frames: a Validator allows or refuses (an answer carrying a patch is
// its error, answered 500, as the API server refuses a validating webhook's
// patch); a Mutator may patch what it allows. Both return an Answer
// (answer.hpp), whose refusal codes the frame counts. A bare WebhookHandler
// answers an AdmissionResponse and its refusals are counted by result only.
//
// The handler runs on the server's thread and must answer well within the
// webhook's timeoutSeconds. It is given request.dryRun: on a dry run it must
// decide exactly as it otherwise would and leave no trace (no write, no
// reservation, no event), which is what sideEffects: NoneOnDryRun declares.
//
// Metrics (label webhook = the name given here):
//   tally_webhook_requests_total{webhook,operation,result}  result: allowed | refused | error
//   tally_webhook_malformed_reviews_total{webhook}
//   tally_webhook_refusals_total{webhook,operation,code}      a Validator's or Mutator's refusal,
//                                                            one per code ("Unspecified" when it names none)
//   tally_webhook_duration_seconds{webhook}                  decode, decide and encode

#include <functional>
#include <memory>
#include <string>

#include "tally/observability/metrics.hpp"
#include "tally/runtime/admission/answer.hpp"
#include "tally/runtime/admission/review.hpp"
#include "tally/runtime/http/server.hpp"

namespace tally::runtime::admission {

using WebhookHandler = std::function<AdmissionResponse(const AdmissionRequest&)>;
using Decide = std::function<Answer(const AdmissionRequest&)>;

// Distinct types, so that the route knows which frame a decision runs in.
struct Validator {
  Decide decide;
};
struct Mutator {
  Decide decide;
};

// The webhook families of one registry; share one between the webhooks of a process.
class WebhookMetrics {
 public:
  explicit WebhookMetrics(observability::Registry& registry);

  observability::Counter& requests(const std::string& webhook, Operation op, std::string_view result);
  observability::Counter& malformed(const std::string& webhook);
  observability::Counter& refusals(const std::string& webhook, Operation op, std::string_view code);
  observability::Histogram& duration(const std::string& webhook);

  // tally_webhook_refusals_total on `registry` (the family refusals() counts in).
  static observability::Family<observability::Counter>& refusalFamily(observability::Registry& registry);

 private:
  observability::Family<observability::Counter>* requests_;
  observability::Family<observability::Counter>* refusals_;
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
void addWebhook(http::Router& router, std::string path, std::string name, Validator validator,
                WebhookOptions options = {});
void addWebhook(http::Router& router, std::string path, std::string name, Mutator mutator, WebhookOptions options = {});
void addWebhook(http::Router& router, std::string path, std::string name, WebhookHandler handler,
                WebhookOptions options = {});

// The handling behind the route, for tests: the HTTP answer to one body.
http::Response answerReview(const std::string& name, const Validator& validator, std::string_view body,
                            const WebhookOptions& options);
http::Response answerReview(const std::string& name, const Mutator& mutator, std::string_view body,
                            const WebhookOptions& options);
http::Response answerReview(const std::string& name, const WebhookHandler& handler, std::string_view body,
                            const WebhookOptions& options);

}  // namespace tally::runtime::admission
