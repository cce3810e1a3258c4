#pragma once
// Budgets (SPEC 3.3): HRQs apply to the subtree of their namespace; a
// namespace's ResourceQuota caps the namespace. Unknown budgets refuse closed.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "tally/model/cluster.hpp"
#include "tally/model/refusal.hpp"
#include "tally/model/usage.hpp"

namespace tally::model {

// Reads usage per (namespace, quota key): for a subtree (HRQ) or the namespace
// alone (ResourceQuota). Implemented by UsageTotals below and by the
// incremental index, so the budget rule is written once for both.
class UsageReader {
 public:
  virtual ~UsageReader() = default;
  virtual std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const = 0;
  virtual std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const = 0;
};

// A UsageReader over totals recomputed from scratch.
class TotalsUsageReader final : public UsageReader {
 public:
  TotalsUsageReader(const Cluster& cluster, const UsageTotals& totals);
  std::int64_t subtreeUsed(std::string_view ns, std::string_view key) const override;
  std::int64_t namespaceUsed(std::string_view ns, std::string_view key) const override;

 private:
  std::map<std::string, ResourceList> subtree_;
  const UsageTotals& totals_;
};

// A request of `amount` for `key` in namespace `ns` fits when for `ns` and every
// ancestor with an HRQ limit on `key`, used_subtree + amount <= hard, and `ns`'s
// ResourceQuotas allow it. Returns the first refusal, naming the quota, the key,
// the usage, the request and the limit.
std::optional<Refusal> checkBudget(const Cluster& cluster, const UsageReader& usage, std::string_view ns,
                                   std::string_view key, std::int64_t amount);

}  // namespace tally::model
