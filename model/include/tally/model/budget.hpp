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

// One budget question: `amount` more of `key`, of which `included` units are
// already part of the usage (a pod the cache counts, since Kubernetes quota
// counts every non-terminal pod), so the message can say so.
struct BudgetAsk {
  std::string_view key;
  std::int64_t amount = 0;
  std::int64_t included = 0;
};

// A request fits when for its namespace and every ancestor with an HRQ limit on
// the key, used_subtree + amount <= hard, and the namespace's ResourceQuotas
// allow it. Returns the first refusal, naming the quota, the key, the usage, the
// request and the limit. A namespace the (synced) namespace cache does not hold
// is refused as NamespaceUnknown: its ancestors, and so their HRQs, are unknown.
std::optional<Refusal> checkBudget(const Cluster& cluster, const UsageReader& usage, std::string_view ns,
                                   const BudgetAsk& ask);

}  // namespace tally::model
