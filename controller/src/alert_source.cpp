#include "tally/controller/alert_source.hpp"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <mutex>

#include "tally/common/log.hpp"

namespace tally::controller {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;

std::vector<model::ActiveAlert> unreachableAlerts() { return {{std::string(kAlertmanagerUnreachable), ""}}; }

AlertSource::AlertSource(state::Writer& writer, AlertSourceOptions options)
    : writer_(writer), options_(std::move(options)) {
  std::string_view url = options_.url;
  if (!url.starts_with("http://")) {
    urlError_ = "--alertmanager-url " + options_.url + " is not an http:// URL";
  } else {
    url.remove_prefix(7);
    const auto slash = url.find('/');
    std::string_view hostPort = url.substr(0, slash);
    prefix_ = slash == std::string_view::npos ? "" : std::string(url.substr(slash));
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
    const auto colon = hostPort.rfind(':');
    host_ = std::string(hostPort.substr(0, colon));
    port_ = colon == std::string_view::npos ? "80" : std::string(hostPort.substr(colon + 1));
    if (host_.empty()) urlError_ = "--alertmanager-url " + options_.url + " names no host";
  }
  if (options_.metrics) {
    polls_ = &options_.metrics->counter("tally_controller_alertmanager_polls_total",
                                        "Reads of Alertmanager's alerts, by result (ok, unreachable, unreadable).",
                                        {"result"});
    alerts_ = &options_.metrics
                   ->gauge("tally_controller_alertmanager_alerts",
                           "Firing alerts naming a pool in the last read (the unreachable alert included).")
                   .with({});
  }
}

AlertSource::~AlertSource() { stop(); }

Expected<std::string, AlertSource::Failure> AlertSource::fetch() {
  if (!urlError_.empty()) return Failure{urlError_};
  try {
    boost::asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(options_.timeout);
    auto endpoints = resolver.resolve(host_, port_);
    stream.connect(endpoints);
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get,
                                          prefix_ + "/api/v2/alerts?active=true&silenced=false&inhibited=false", 11};
    req.set(bhttp::field::host, host_);
    req.set(bhttp::field::accept, "application/json");
    req.set(bhttp::field::user_agent, "tally-controller");
    stream.expires_after(options_.timeout);
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(16 << 20);
    bhttp::read(stream, buffer, parser);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    auto& res = parser.get();
    if (res.result_int() != 200) {
      return Failure{fmt::format("GET {} answered HTTP {}", options_.url, res.result_int())};
    }
    return std::move(res.body());
  } catch (const std::exception& e) {
    return Failure{fmt::format("GET {} failed: {}", options_.url, e.what())};
  }
}

void AlertSource::pollOnce() {
  std::vector<model::ActiveAlert> alerts;
  auto body = fetch();
  if (!body) {
    logWarning("alertmanager unreachable: every pool gets an alert", {{"error", body.error().message}});
    if (polls_) polls_->with({"unreachable"}).inc();
    alerts = unreachableAlerts();
  } else if (auto parsed = parseAlerts(*body, options_.poolLabel); !parsed) {
    logWarning("alertmanager answer unreadable: every pool gets an alert", {{"error", parsed.error()}});
    if (polls_) polls_->with({"unreadable"}).inc();
    alerts = unreachableAlerts();
  } else {
    if (polls_) polls_->with({"ok"}).inc();
    alerts = std::move(parsed).value();
  }
  if (alerts_) alerts_->set(static_cast<double>(alerts.size()));
  writer_.postObjectsChange([alerts = std::move(alerts), changed = options_.changed](model::UsageIndex& index) {
    auto& cluster = index.mutableClusterForUntrackedKinds();
    if (cluster.alerts == alerts) return;
    cluster.alerts = alerts;
    if (changed) changed();
  });
}

void AlertSource::start() {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      pollOnce();
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, options_.interval, [] { return false; });
    }
  });
}

void AlertSource::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

}  // namespace tally::controller
