#include "tally/runtime/admission/webhook.hpp"

#include <chrono>
#include <exception>
#include <tuple>

#include "tally/common/log.hpp"

namespace tally::runtime::admission {

namespace {

http::Response plain(int status, std::string message) {
  http::Response r;
  r.status = status;
  r.contentType = "text/plain; charset=utf-8";
  r.body = std::move(message);
  r.body += '\n';
  return r;
}

}  // namespace

WebhookMetrics::WebhookMetrics(observability::Registry& registry)
    : requests_(&registry.counter("tally_webhook_requests_total",
                                  "Admission reviews answered, by webhook, operation and result "
                                  "(allowed, refused, error).",
                                  {"webhook", "operation", "result"})),
      malformed_(&registry.counter("tally_webhook_malformed_reviews_total",
                                   "Admission review bodies that could not be decoded (answered 400).", {"webhook"})),
      duration_(&registry.histogram("tally_webhook_duration_seconds",
                                    "Time to decode, decide and encode one admission review.",
                                    observability::exponentialBuckets(0.0001, 2, 16), {"webhook"})) {}

observability::Counter& WebhookMetrics::requests(const std::string& webhook, Operation op, std::string_view result) {
  return requests_->with({webhook, operationName(op), result});
}
observability::Counter& WebhookMetrics::malformed(const std::string& webhook) { return malformed_->with({webhook}); }
observability::Histogram& WebhookMetrics::duration(const std::string& webhook) { return duration_->with({webhook}); }

http::Response answerReview(const std::string& name, const WebhookHandler& handler, std::string_view body,
                            const WebhookOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  auto measured = [&](http::Response r) {
    if (options.metrics) {
      options.metrics->duration(name).observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    return r;
  };
  auto request = decodeAdmissionReview(body, options.decode);
  if (!request) {
    if (options.metrics) options.metrics->malformed(name).inc();
    const int status = request.error().httpStatus == 413 ? 413 : 400;
    return measured(plain(status, "webhook " + name + ": " + request.error().message));
  }
  AdmissionResponse decision;
  try {
    decision = handler(*request);
  } catch (const std::exception& e) {
    if (options.metrics) options.metrics->requests(name, request->operation, "error").inc();
    const std::string message = "webhook " + name + " failed on request " + request->uid + ": " + e.what();
    logError(message);
    return measured(plain(500, message));
  } catch (...) {
    if (options.metrics) options.metrics->requests(name, request->operation, "error").inc();
    return measured(plain(500, "webhook " + name + " failed on request " + request->uid));
  }
  if (options.metrics) {
    options.metrics->requests(name, request->operation, decision.allowed ? "allowed" : "refused").inc();
  }
  http::Response r;
  r.body = encodeAdmissionReview(request->uid, decision);
  return measured(std::move(r));
}

void addWebhook(http::Router& router, std::string path, std::string name, WebhookHandler handler,
                WebhookOptions options) {
  const http::Caller caller = options.caller;
  auto shared = std::make_shared<const std::tuple<std::string, WebhookHandler, WebhookOptions>>(
      name, std::move(handler), std::move(options));
  router.add(
      "POST", std::move(path), std::move(name),
      [shared](http::Request& request, http::Respond respond) {
        const auto& [webhook, decide, opts] = *shared;
        if (!opts.run) return respond(answerReview(webhook, decide, request.body(), opts));
        opts.run([shared, body = std::string(request.body()), respond = std::move(respond)] {
          const auto& [w, d, o] = *shared;
          respond(answerReview(w, d, body, o));
        });
      },
      caller);
}

}  // namespace tally::runtime::admission
