#include <boost/beast/http/fields.hpp>

#include "request_access.hpp"
#include "tally/runtime/http/server.hpp"

namespace tally::runtime::http {

namespace {

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding; a '%' not followed by two hex
// digits is kept as it is.
std::string decodeComponent(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < s.size() && hexValue(s[i + 1]) >= 0 && hexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<QueryParam> parseQuery(std::string_view query) {
  std::vector<QueryParam> params;
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    params.push_back({decodeComponent(pair.substr(0, eq)),
                      eq == std::string_view::npos ? std::string() : decodeComponent(pair.substr(eq + 1))});
  }
  return params;
}

}  // namespace

Request::Request(std::string method, std::string_view target, std::string body) : method_(std::move(method)) {
  const auto q = target.find('?');
  path_.assign(target.substr(0, q));
  if (q != std::string_view::npos) query_.assign(target.substr(q + 1));
  body_ = std::move(body);
}

const std::vector<QueryParam>& Request::queryParams() const {
  if (!params_) params_ = parseQuery(query_);
  return *params_;
}

std::optional<std::string_view> Request::query(std::string_view key) const {
  for (const auto& p : queryParams()) {
    if (p.key == key) return std::string_view(p.value);
  }
  return std::nullopt;
}

std::optional<std::string_view> Request::header(std::string_view name) const {
  if (!fields_) return std::nullopt;
  const auto& fields = *static_cast<const boost::beast::http::fields*>(fields_);
  auto it = fields.find(boost::beast::string_view(name.data(), name.size()));
  if (it == fields.end()) return std::nullopt;
  return std::string_view(it->value().data(), it->value().size());
}

Response plainErrorBody(int status, std::string_view message) {
  Response r;
  r.status = status;
  r.contentType = "text/plain; charset=utf-8";
  r.body.reserve(message.size() + 1);
  r.body.append(message).append("\n");
  return r;
}

void Router::add(std::string method, std::string path, std::string label, Handler handler, Caller caller) {
  Route& route = routes_[path];
  route.label = std::move(label);
  route.byMethod[std::move(method)] = Entry{std::move(handler), caller};
}

std::optional<std::string> Router::firstVerifiedRoute() const {
  for (const auto& [path, route] : routes_) {
    for (const auto& [method, entry] : route.byMethod) {
      if (entry.caller == Caller::VerifiedClient) return method + " " + path;
    }
  }
  return std::nullopt;
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match m;
  auto route = routes_.find(path);
  if (route == routes_.end()) {
    m.status = 404;
    return m;
  }
  m.label = route->second.label;
  auto handler = route->second.byMethod.find(method);
  if (handler == route->second.byMethod.end()) {
    m.status = 405;
    for (const auto& [name, h] : route->second.byMethod) m.allow += (m.allow.empty() ? "" : ", ") + name;
    return m;
  }
  m.handler = &handler->second.handler;
  m.caller = handler->second.caller;
  return m;
}

}  // namespace tally::runtime::http
