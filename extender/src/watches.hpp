#pragma once
// The runtime informers that feed the CacheWriter: one per kind the model
// reads, each decoding with the codec the rest of Tally uses.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tally/codec/objects.hpp"
#include "tally/extender/cache_writer.hpp"
#include "tally/extender/metrics.hpp"
#include "tally/runtime/client.hpp"

namespace tally::extender {

struct WatchOptions {
  // The ConfigMap of the add-on catalogue; empty: none is watched.
  std::optional<codec::BillingPlansLocation> billingPlans = codec::BillingPlansLocation{};
  bool organizations = true;
  bool kubevirt = false;
  std::filesystem::path ledgerDir;  // empty: no ledger (no reservation holds)
  std::chrono::milliseconds ledgerInterval{30'000};
  std::chrono::milliseconds pollInterval{100};
  // Ask for the built-in kinds (nodes, pods, namespaces, resource quotas) as
  // protobuf; CRDs are always JSON.
  bool protobuf = true;
};

class Watches {
 public:
  Watches(std::shared_ptr<runtime::Client> client, CacheWriter& writer, ExtenderMetrics& metrics, WatchOptions options);
  ~Watches();
  Watches(const Watches&) = delete;
  Watches& operator=(const Watches&) = delete;

  // The kinds these options watch (the CacheWriter waits for each to sync).
  static std::set<model::Kind> kinds(const WatchOptions& options);

  void start();
  void stop();

  struct Source;

 private:
  void poll(std::stop_token stop);

  WatchOptions options_;
  CacheWriter& writer_;
  ExtenderMetrics& metrics_;
  std::vector<std::unique_ptr<Source>> sources_;
  std::jthread poller_;
};

}  // namespace tally::extender
