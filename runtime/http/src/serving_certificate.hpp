#pragma once
// The TLS context new connections are served with, loaded from a certificate
// and a key file (and, for mutual TLS, the client CA file) and loaded again
// when one of them changes. Used by the
// accepting thread only; a connection keeps the context it started with.

#include <sys/stat.h>

#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "tally/runtime/http/server.hpp"

namespace tally::runtime::http::detail {

class ServingCertificate {
 public:
  // Throws std::runtime_error naming the file that cannot be loaded.
  explicit ServingCertificate(TlsFiles files);

  // The context for a connection just accepted: when the check interval has
  // passed, the files' identity is compared with what was loaded last and,
  // if it differs, they are loaded into a fresh context; one that fails to
  // load is logged and the current context stays.
  std::shared_ptr<boost::asio::ssl::context> forNewConnection();

  std::uint64_t reloads() const { return reloads_.load(std::memory_order_relaxed); }
  std::uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }

 private:
  // What identifies a file's content without reading it.
  struct Stamp {
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = -1;
    timespec modified{};
    bool operator==(const Stamp& o) const {
      return device == o.device && inode == o.inode && size == o.size && modified.tv_sec == o.modified.tv_sec &&
             modified.tv_nsec == o.modified.tv_nsec;
    }
  };
  static Stamp stampOf(const std::string& path);
  Stamp caStamp() const;

  TlsFiles files_;
  std::shared_ptr<boost::asio::ssl::context> current_;
  Stamp certStamp_, keyStamp_, caStamp_;
  std::chrono::steady_clock::time_point lastCheck_;
  std::atomic<std::uint64_t> reloads_{0}, failures_{0};
};

}  // namespace tally::runtime::http::detail
