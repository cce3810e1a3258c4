// The Alertmanager source's polling thread next to a running state writer and
// readers of its snapshots (TSan: `make test-sanitizers`): alerts published by
// its tasks are seen by readers, and start/stop while the writer runs is clean.

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <thread>

#include "tally/controller/alert_source.hpp"
#include "tally/state/writer.hpp"

namespace tally::controller {
namespace {

using namespace std::chrono_literals;

// Answers every connection with one firing alert of pool h200.
class FiringAlertmanager {
 public:
  FiringAlertmanager() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      const std::string body = R"([{"labels":{"alertname":"GpuXidErrors","gpu_pool":"h200"}}])";
      const std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      for (;;) {
        boost::asio::ip::tcp::socket socket(io_);
        boost::system::error_code ec;
        acceptor_.accept(socket, ec);
        if (ec || stopping_) return;
        boost::asio::streambuf request;
        boost::asio::read_until(socket, request, "\r\n\r\n", ec);
        boost::asio::write(socket, boost::asio::buffer(answer), ec);
      }
    });
  }
  ~FiringAlertmanager() {
    stopping_ = true;
    boost::system::error_code ec;
    boost::asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

TEST(AlertSourceConcurrency, PollsWhileTheWriterPublishesAndReadersRead) {
  FiringAlertmanager server;
  state::Writer writer({});
  writer.start();
  std::atomic<int> woken{0};
  AlertSourceOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(server.port());
  o.interval = 5ms;
  o.changed = [&] { ++woken; };
  AlertSource source(writer, o);
  source.start();
  std::atomic<bool> seen{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!seen && std::chrono::steady_clock::now() < deadline) {
        auto snap = writer.snapshots().read();
        if (snap && !snap->cluster().alerts.empty() && snap->cluster().alerts.front().name == "GpuXidErrors") {
          seen = true;
        }
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  for (auto& r : readers) r.join();
  source.stop();
  source.start();  // a second start after a stop polls again
  std::this_thread::sleep_for(20ms);
  source.stop();
  writer.stop();
  EXPECT_TRUE(seen);
  // The alerts changed once (empty -> firing); later polls read the same.
  EXPECT_EQ(woken.load(), 1);
}

}  // namespace
}  // namespace tally::controller
