#include "tally/runtime/process.hpp"

#include <simdjson.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "tally/common/log.hpp"
#include "tally/runtime/config.hpp"

namespace tally::runtime::process {

std::chrono::milliseconds durationFlag(std::string_view flag, std::string_view text) {
  auto parsed = parseDuration(text);
  if (!parsed) throw std::invalid_argument(std::string(flag) + ": " + parsed.error().message);
  return *parsed;
}

Result<std::chrono::milliseconds> parseDuration(std::string_view text) {
  const std::string s(text);
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(s, &end);
  } catch (const std::exception&) {
    return Error{ErrorCode::kConfig, "duration \"" + s + "\" is not a number with a unit (250ms, 10s, 2m, 1h)"};
  }
  const std::string unit = s.substr(end);
  double ms = 0;
  if (unit == "ms") {
    ms = value;
  } else if (unit == "s" || unit.empty()) {
    ms = value * 1000;
  } else if (unit == "m") {
    ms = value * 60'000;
  } else if (unit == "h") {
    ms = value * 3'600'000;
  } else {
    return Error{ErrorCode::kConfig, "duration \"" + s + "\" has unknown unit \"" + unit + "\" (ms, s, m, h)"};
  }
  if (!std::isfinite(ms) || ms < 0) return Error{ErrorCode::kConfig, "duration \"" + s + "\" is negative or too large"};
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

Status setUpLogging(std::string_view level, std::string_view format) {
  auto lowest = parseLogLevel(level);
  if (!lowest) return Error{ErrorCode::kConfig, lowest.error().describe()};
  auto lines = parseLogFormat(format);
  if (!lines) return Error{ErrorCode::kConfig, lines.error().describe()};
  setLogLevel(*lowest);
  setLogFormat(*lines);
  return {};
}

namespace {

void reportApiServer(Client& client) {
  HttpRequest request;
  request.target = "/version";
  auto response = client.send(request);
  if (!response) {
    logWarning("API server not reachable yet; the watches will retry", {{"error", response.error().describe()}});
    return;
  }
  std::string version = "unknown";
  simdjson::ondemand::parser parser;
  simdjson::padded_string body(response->body);
  simdjson::ondemand::document doc;
  std::string_view v;
  if (parser.iterate(body).get(doc) == simdjson::SUCCESS &&
      doc["gitVersion"].get_string().get(v) == simdjson::SUCCESS) {
    version = v;
  }
  logInfo("API server reached", {{"host", client.config().host}, {"port", client.config().port}, {"version", version}});
}

}  // namespace

Result<std::shared_ptr<Client>> connect(const ClientFlags& flags) {
  auto config = flags.kubeconfig.empty() ? defaultConfig() : loadKubeconfig(flags.kubeconfig, flags.context);
  if (!config) return std::move(config).error().withContext("no Kubernetes configuration");
  if (!flags.userAgent.empty()) config->userAgent = flags.userAgent;
  auto created = Client::create(std::move(config).value());
  if (!created) return std::move(created).error().withContext("cannot create the Kubernetes client");
  reportApiServer(**created);
  return created;
}

}  // namespace tally::runtime::process
