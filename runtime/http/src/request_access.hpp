#pragma once
// How the server fills a Request from Beast's parsed message without the
// public header naming Beast.

#include <boost/beast/http/fields.hpp>

#include "tally/runtime/http/server.hpp"

namespace tally::runtime::http::detail {

struct RequestAccess {
  // `fields` must outlive the handler's use of the request (until it responds).
  static void fill(Request& r, std::string_view method, std::string_view target, std::string&& body,
                   const boost::beast::http::fields& fields, const ClientIdentity* client) {
    r.method_.assign(method);
    const auto q = target.find('?');
    r.path_.assign(target.substr(0, q));
    if (q == std::string_view::npos) {
      r.query_.clear();
    } else {
      r.query_.assign(target.substr(q + 1));
    }
    r.body_ = std::move(body);
    r.params_.reset();
    r.fields_ = &fields;
    r.client_ = client;
  }
};

}  // namespace tally::runtime::http::detail
