#include "tally/state/usage_days.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace tally::state {

namespace {

// One page of parts at a time: each is up to ~1 MiB.
constexpr std::int64_t kPartsPerPage = 8;

}  // namespace

std::optional<model::Timestamp> UsageDay::through() const {
  std::optional<model::Timestamp> out;
  for (const auto& p : parts) {
    if (p.through && (!out || *p.through > *out)) out = p.through;
  }
  return out;
}

std::vector<model::UsageBucket> UsageDay::buckets() const {
  std::vector<model::UsageBucket> out;
  for (const auto& p : parts) model::mergeBuckets(out, p.buckets);
  return out;
}

std::vector<UsageDay> assembleUsageDays(std::vector<codec::UsageCheckpoint> parts, model::Timestamp first,
                                        model::Timestamp last) {
  std::map<model::Timestamp, UsageDay> days;
  for (auto& p : parts) {
    if (p.day < model::dayOf(first) || p.day > model::dayOf(last)) continue;
    UsageDay& d = days[p.day];
    d.day = p.day;
    d.parts.push_back(std::move(p));
  }
  std::vector<UsageDay> out;
  out.reserve(days.size());
  for (auto& [day, d] : days) {
    std::sort(d.parts.begin(), d.parts.end(), [](const auto& a, const auto& b) { return a.part < b.part; });
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<model::UsageBucket> usageIn(const std::vector<UsageDay>& days, model::Timestamp since,
                                        model::Timestamp until) {
  std::vector<model::UsageBucket> all;
  for (const auto& d : days) {
    if (d.day + model::kSecondsPerDay <= since || d.day >= until) continue;
    model::mergeBuckets(all, d.buckets());
  }
  return model::bucketsIn(all, since, until);
}

std::string usageExport(const std::vector<model::UsageBucket>& buckets,
                        const std::vector<model::BillingWindow>& windows) {
  std::string out = codec::usageLines(buckets);
  for (const auto& w : windows) out += codec::windowLine(w) + "\n";
  return out;
}

runtime::Result<std::vector<UsageDay>> readUsageDays(runtime::Client& client, const std::string& ns,
                                                     model::Timestamp first, model::Timestamp last) {
  runtime::ListOptions opts;
  opts.labelSelector = codec::usageDaysSelector(first, last);
  opts.limit = kPartsPerPage;
  const runtime::Resource configMaps = runtime::Resource::core("configmaps", ns);
  std::vector<codec::UsageCheckpoint> parts;
  do {
    auto response = client.list(configMaps, opts);
    if (!response)
      return std::move(response).error().withContext("list configmaps -n " + ns + " -l " + opts.labelSelector);
    auto page = codec::decodeUsageConfigMapList(response->body);
    if (!page) {
      return runtime::Error(runtime::ErrorCode::kDecode, fmt::format("list configmaps -n {} -l {}: {}", ns,
                                                                     opts.labelSelector, page.error().describe()));
    }
    for (auto& p : page->items) parts.push_back(std::move(p));
    opts.continueToken = page->continueToken;
  } while (!opts.continueToken.empty());
  return assembleUsageDays(std::move(parts), first, last);
}

runtime::Result<std::vector<model::UsageBucket>> readUsage(runtime::Client& client, const std::string& ns,
                                                           model::Timestamp since, model::Timestamp until) {
  auto days = readUsageDays(client, ns, since, until - 1);
  if (!days) return std::move(days).error();
  return usageIn(*days, since, until);
}

}  // namespace tally::state
