#pragma once
// Small synthetic clusters and request bodies for the extender's tests and
// benches, on the model's objects (tally/model/testing/fixtures.hpp).

#include <memory>
#include <string>
#include <vector>

#include "tally/extender/assumptions.hpp"
#include "tally/model/testing/fixtures.hpp"

namespace tally::extender::testing {

// A writer (no thread) with every kind synced, holding `objects`, flushed.
// Tenants in bare namespaces (no Organizations): the unorganized-namespace
// rule is tested on its own.
inline CacheWriter::Options fixtureOptions() {
  CacheWriter::Options o;
  o.tenancy.unorganized = model::UnorganizedGpuPolicy::Allow;
  return o;
}
std::unique_ptr<CacheWriter> loadedWriter(const std::vector<state::Object>& objects,
                                          CacheWriter::Options options = fixtureOptions());

// The JSON of a v1 Pod as the scheduler sends it.
std::string podJson(const std::string& ns, const std::string& name, const std::string& uid, std::int64_t count,
                    const std::string& resource = std::string(model::testing::kH200));
// ExtenderArgs with NodeNames (nodeCacheCapable: true).
std::string extenderArgs(const std::string& pod, const std::vector<std::string>& nodes);
// ExtenderArgs with a full NodeList (nodeCacheCapable: false).
std::string extenderArgsWithNodeList(const std::string& pod, const std::vector<std::string>& nodes);

// A cluster of `nodes` passthrough nodes (8 devices each) and `pods` bound
// one-device pods spread over them, in `namespaces` tenants.
std::vector<state::Object> syntheticCluster(std::size_t nodes, std::size_t pods, std::size_t namespaces = 20);

}  // namespace tally::extender::testing
