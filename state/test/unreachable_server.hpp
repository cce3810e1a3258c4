#pragma once
// A client of an API server that is not there (nothing listens on port 1):
// the informers retry in the background, no cache ever syncs.

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "tally/runtime/client.hpp"

namespace tally::state::testing {

inline std::shared_ptr<runtime::Client> unreachableClient() {
  runtime::ClusterConfig config;
  config.host = "127.0.0.1";
  config.port = "1";
  config.connectTimeout = std::chrono::milliseconds(100);
  auto client = runtime::Client::create(config);
  EXPECT_TRUE(client) << client.error().describe();
  return client ? std::move(*client) : nullptr;
}

}  // namespace tally::state::testing
