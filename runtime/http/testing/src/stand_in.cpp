#include "tally/runtime/http/testing/stand_in.hpp"

#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace tally::runtime::http::testing {

struct StandIn::Socket {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor{io, {boost::asio::ip::make_address("127.0.0.1"), 0}};
};

StandIn::StandIn() : socket_(std::make_unique<Socket>()) {
  thread_ = std::thread([this] { serve(); });
}

StandIn::~StandIn() {
  stopping_ = true;
  // Wake the blocked accept with one connection.
  boost::system::error_code ec;
  boost::asio::ip::tcp::socket poke(socket_->io);
  poke.connect(socket_->acceptor.local_endpoint(), ec);
  thread_.join();
}

void StandIn::serve() {
  for (;;) {
    boost::asio::ip::tcp::socket socket(socket_->io);
    boost::system::error_code ec;
    socket_->acceptor.accept(socket, ec);
    if (ec || stopping_) return;
    boost::asio::streambuf request;
    boost::asio::read_until(socket, request, "\r\n\r\n", ec);
    std::string head(boost::asio::buffers_begin(request.data()), boost::asio::buffers_end(request.data()));
    std::string status, body;
    {
      std::lock_guard lock(mu_);
      lastRequest_ = head.substr(0, head.find("\r\n"));
      status = status_;
      body = body_;
    }
    const std::string answer = "HTTP/1.1 " + status +
                               "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\n\r\n" + body;
    boost::asio::write(socket, boost::asio::buffer(answer), ec);
  }
}

void StandIn::answer(std::string status, std::string body) {
  std::lock_guard lock(mu_);
  status_ = std::move(status);
  body_ = std::move(body);
}

std::string StandIn::lastRequest() const {
  std::lock_guard lock(mu_);
  return lastRequest_;
}

std::uint16_t StandIn::port() const { return socket_->acceptor.local_endpoint().port(); }

}  // namespace tally::runtime::http::testing
