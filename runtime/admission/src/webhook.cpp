#include "tally/runtime/admission/webhook.hpp"

#include <chrono>
#include <exception>
#include <memory>
#include <variant>

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

// One route's decision and the frame it runs in.
struct Frame {
  enum class Kind { kValidating, kMutating, kUntyped };
  Kind kind;
  Decide decide;
};

Frame frameOf(Validator v) { return {Frame::Kind::kValidating, std::move(v.decide)}; }
Frame frameOf(Mutator m) { return {Frame::Kind::kMutating, std::move(m.decide)}; }
Frame frameOf(WebhookHandler h) {
  return {Frame::Kind::kUntyped, [h = std::move(h)](const AdmissionRequest& r) { return Answer{h(r), {}}; }};
}

void countRefusals(const std::string& name, const Frame& frame, const AdmissionRequest& request, const Answer& answer,
                   WebhookMetrics& metrics) {
  if (answer.allowed() || frame.kind == Frame::Kind::kUntyped) return;
  if (answer.codes.empty()) metrics.refusals(name, request.operation, "Unspecified").inc();
  for (const auto& code : answer.codes) metrics.refusals(name, request.operation, code).inc();
}

// The handler's answer, or the message of its failure.
std::variant<Answer, std::string> decided(const std::string& name, const Frame& frame,
                                          const AdmissionRequest& request) {
  const std::string failed = "webhook " + name + " failed on request " + request.uid;
  try {
    Answer answer = frame.decide(request);
    if (frame.kind == Frame::Kind::kValidating && !answer.response.patch.empty()) {
      return failed + ": a validating webhook answered a patch";
    }
    return answer;
  } catch (const std::exception& e) {
    return failed + ": " + e.what();
  } catch (...) {
    return failed;
  }
}

http::Response answerFrame(const std::string& name, const Frame& frame, std::string_view body,
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
  auto outcome = decided(name, frame, *request);
  if (auto* failure = std::get_if<std::string>(&outcome)) {
    if (options.metrics) options.metrics->requests(name, request->operation, "error").inc();
    logError(*failure);
    return measured(plain(500, std::move(*failure)));
  }
  const Answer& answer = std::get<Answer>(outcome);
  if (options.metrics) {
    options.metrics->requests(name, request->operation, answer.allowed() ? "allowed" : "refused").inc();
    countRefusals(name, frame, *request, answer, *options.metrics);
  }
  http::Response r;
  r.body = encodeAdmissionReview(request->uid, answer.response);
  return measured(std::move(r));
}

struct Route {
  std::string name;
  Frame frame;
  WebhookOptions options;
};

void addFrame(http::Router& router, std::string path, std::string name, Frame frame, WebhookOptions options) {
  const http::Caller caller = options.caller;
  auto route = std::make_shared<const Route>(Route{name, std::move(frame), std::move(options)});
  router.add(
      "POST", std::move(path), std::move(name),
      [route](http::Request& request, http::Respond respond) {
        if (!route->options.run) return respond(answerFrame(route->name, route->frame, request.body(), route->options));
        route->options.run([route, body = std::string(request.body()), respond = std::move(respond)] {
          respond(answerFrame(route->name, route->frame, body, route->options));
        });
      },
      caller);
}

}  // namespace

WebhookMetrics::WebhookMetrics(observability::Registry& registry)
    : requests_(&registry.counter("tally_webhook_requests_total",
                                  "Admission reviews answered, by webhook, operation and result "
                                  "(allowed, refused, error).",
                                  {"webhook", "operation", "result"})),
      refusals_(&refusalFamily(registry)),
      malformed_(&registry.counter("tally_webhook_malformed_reviews_total",
                                   "Admission review bodies that could not be decoded (answered 400).", {"webhook"})),
      duration_(&registry.histogram("tally_webhook_duration_seconds",
                                    "Time to decode, decide and encode one admission review.",
                                    observability::exponentialBuckets(0.0001, 2, 16), {"webhook"})) {}

observability::Family<observability::Counter>& WebhookMetrics::refusalFamily(observability::Registry& registry) {
  return registry.counter("tally_webhook_refusals_total",
                          "Admission refusals by webhook, operation and reason code (one per code of a refusal).",
                          {"webhook", "operation", "code"});
}

observability::Counter& WebhookMetrics::requests(const std::string& webhook, Operation op, std::string_view result) {
  return requests_->with({webhook, operationName(op), result});
}
observability::Counter& WebhookMetrics::refusals(const std::string& webhook, Operation op, std::string_view code) {
  return refusals_->with({webhook, operationName(op), code});
}
observability::Counter& WebhookMetrics::malformed(const std::string& webhook) { return malformed_->with({webhook}); }
observability::Histogram& WebhookMetrics::duration(const std::string& webhook) { return duration_->with({webhook}); }

http::Response answerReview(const std::string& name, const Validator& validator, std::string_view body,
                            const WebhookOptions& options) {
  return answerFrame(name, frameOf(validator), body, options);
}
http::Response answerReview(const std::string& name, const Mutator& mutator, std::string_view body,
                            const WebhookOptions& options) {
  return answerFrame(name, frameOf(mutator), body, options);
}
http::Response answerReview(const std::string& name, const WebhookHandler& handler, std::string_view body,
                            const WebhookOptions& options) {
  return answerFrame(name, frameOf(handler), body, options);
}

void addWebhook(http::Router& router, std::string path, std::string name, Validator validator, WebhookOptions options) {
  addFrame(router, std::move(path), std::move(name), frameOf(std::move(validator)), std::move(options));
}
void addWebhook(http::Router& router, std::string path, std::string name, Mutator mutator, WebhookOptions options) {
  addFrame(router, std::move(path), std::move(name), frameOf(std::move(mutator)), std::move(options));
}
void addWebhook(http::Router& router, std::string path, std::string name, WebhookHandler handler,
                WebhookOptions options) {
  addFrame(router, std::move(path), std::move(name), frameOf(std::move(handler)), std::move(options));
}

}  // namespace tally::runtime::admission
