#pragma once
// A stand-in HTTP server for a peer the code under test calls (Alertmanager,
// say): on a loopback ephemeral port, one connection at a time, every request
// answered with the status and body set last, then the connection closed.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tally::runtime::http::testing {

class StandIn {
 public:
  StandIn();
  ~StandIn();
  StandIn(const StandIn&) = delete;
  StandIn& operator=(const StandIn&) = delete;

  // `status` as on the status line ("200 OK"); the body is sent as application/json.
  void answer(std::string status, std::string body);
  // The request line of the request answered last ("GET /path HTTP/1.1").
  std::string lastRequest() const;
  std::uint16_t port() const;

 private:
  struct Socket;
  void serve();
  std::unique_ptr<Socket> socket_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::string status_ = "200 OK", body_ = "[]", lastRequest_;
  std::thread thread_;
};

}  // namespace tally::runtime::http::testing
