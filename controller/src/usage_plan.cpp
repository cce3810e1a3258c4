#include "tally/controller/usage_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "tally/codec/usage_configmap.hpp"
#include "tally/common/rfc3339.hpp"

namespace tally::controller {

namespace {

const state::UsageDay* dayAt(const std::vector<state::UsageDay>& days, model::Timestamp day) {
  for (const auto& d : days) {
    if (d.day == day) return &d;
  }
  return nullptr;
}

}  // namespace

UsageWrite planUsageWrite(const std::vector<state::UsageDay>& days, model::Timestamp now, const UsageTerm& term,
                          const std::vector<model::Holder>& current, std::size_t maxBytes) {
  UsageWrite w;
  // Where the record stands: the latest day with a `through`; with none at all, now.
  std::optional<model::Timestamp> found;
  for (const auto& d : days) {
    if (auto t = d.through(); t && (!found || *t > *found)) found = t;
  }
  const model::Timestamp from = found.value_or(now);
  if (from > now) return w;  // a record ahead of this clock: nothing to add until the clock passes it
  w.from = from;
  w.day = model::dayOf(from);  // a day closed at midnight continues in the next
  w.held = (term.through && *term.through == from) ? term.holders : current;
  w.until = std::min(now, w.day + model::kSecondsPerDay);
  w.added = model::accrue(w.held, w.from, w.until);
  std::string addedLines = codec::usageLines(w.added);
  if (addedLines.size() > maxBytes && w.until > model::hourOf(from) + model::kSecondsPerHour) {
    // A long gap with many holders: one hour at a time, each write its own part's worth.
    w.until = model::hourOf(from) + model::kSecondsPerHour;
    w.added = model::accrue(w.held, w.from, w.until);
    addedLines = codec::usageLines(w.added);
  }
  const state::UsageDay* day = dayAt(days, w.day);
  const codec::UsageCheckpoint* last = (day && !day->parts.empty()) ? &day->parts.back() : nullptr;
  w.part = last ? last->part : 0;
  w.name = codec::usageConfigMapName(w.day, w.part);
  if (last && !last->sealed) {
    std::vector<model::UsageBucket> merged = last->buckets;
    model::mergeBuckets(merged, w.added);
    std::string usage = codec::usageLines(merged);
    w.resourceVersion = last->resourceVersion;
    if (usage.size() <= maxBytes) {
      w.action = UsageWrite::Action::kUpdate;
      w.usage = std::move(usage);
      w.through = w.until;
      return w;
    }
    if (!last->buckets.empty()) {
      // Full: sealed first, so that no writer pinned to what it read adds to it again.
      w.action = UsageWrite::Action::kSeal;
      w.usage = codec::usageLines(last->buckets);
      w.through = last->through;
      w.sealed = true;
      w.added.clear();
      return w;
    }
    // An empty part that cannot take even this write: no new part would either.
  }
  if (addedLines.size() > maxBytes) {
    w.action = UsageWrite::Action::kTooLarge;
    w.error = fmt::format("configmap {}: one hour of usage from {} is {} bytes, more than a part holds ({} bytes)",
                          w.name, formatRfc3339(w.from), addedLines.size(), maxBytes);
    return w;
  }
  if (last) {
    w.part = last->part + 1;
    w.name = codec::usageConfigMapName(w.day, w.part);
    w.resourceVersion.clear();
  }
  w.action = UsageWrite::Action::kCreate;
  w.usage = std::move(addedLines);
  w.through = w.until;
  return w;
}

UsageTerm termAfter(const UsageWrite& write, const UsageTerm& before, model::Timestamp now,
                    const std::vector<model::Holder>& current) {
  if (write.action != UsageWrite::Action::kCreate && write.action != UsageWrite::Action::kUpdate) return before;
  return UsageTerm{write.until, write.until < now ? write.held : current};
}

bool flushDone(const UsageWrite& write, model::Timestamp now) {
  switch (write.action) {
    case UsageWrite::Action::kNone:
    case UsageWrite::Action::kTooLarge: return true;
    case UsageWrite::Action::kSeal: return false;
    case UsageWrite::Action::kCreate:
    case UsageWrite::Action::kUpdate: return write.until >= now;
  }
  return true;
}

std::string usageConfigMapBody(const std::string& ns, const UsageWrite& write) {
  return codec::encodeUsageConfigMap(
      {ns, write.name, write.resourceVersion, write.day, write.part, write.through, write.sealed, write.usage});
}

std::optional<UsagePeriod> parseUsagePeriod(std::optional<std::string_view> since,
                                            std::optional<std::string_view> until, model::Timestamp now) {
  auto timeOf = [](std::optional<std::string_view> text,
                   std::optional<model::Timestamp> fallback) -> std::optional<model::Timestamp> {
    if (!text || text->empty()) return fallback;
    auto t = parseRfc3339(*text);
    if (!t) return std::nullopt;
    return t->seconds;
  };
  auto from = timeOf(since, std::nullopt);
  auto to = timeOf(until, now);
  if (!from || !to || *from < 0 || *to <= *from) return std::nullopt;
  return UsagePeriod{*from, *to};
}

std::string usageAnswer(const std::vector<state::UsageDay>& days, const UsagePeriod& period,
                        const model::Ledger& ledger, model::Timestamp now) {
  return state::usageExport(state::usageIn(days, period.since, period.until),
                            model::billingWindows(ledger, period.since, period.until, now));
}

}  // namespace tally::controller
