#pragma once
// Usage records: who held GPU units when, and for how long, in unit-seconds;
// and the billing window of each reservation. Pure functions of the cluster
// and of the ledger; the controller's UsageRecorder keeps the checkpoints and
// tallyctl usage reads them.
//
// Who is billed (so nothing is billed twice):
//  * a held device (GPUDevice Bound or Attached on a node) holds its count
//    units of its class's resource, attached to a VMI or not;
//  * a VMI is no holder of its own: its GPUs are its devices'. Its launcher
//    pod (a pod a VMI lists in status.activePods, model::launchOf) bills only
//    what its devices do not cover (podUsage), normally nothing;
//  * any other non-terminal pod bound to a node holds the GPU units it
//    requests (podUsage's capacity). A terminal or unbound pod holds nothing;
//  * an allocated ResourceClaim of a DRA pool holds the units of its devices
//    (claimUsage's capacity); the pods using it hold none of them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

enum class HolderKind { Pod, GpuDevice, ResourceClaim };
std::string_view toString(HolderKind kind);
std::optional<HolderKind> parseHolderKind(std::string_view text);

// One holder of one resource at one moment.
struct Holder {
  HolderKind kind = HolderKind::Pod;
  std::string ns;
  std::string name;
  std::string uid;
  std::string className;  // the device's class; for a pod the class serving its resource ("" when none)
  std::string resource;
  std::int64_t units = 0;
  friend bool operator==(const Holder&, const Holder&) = default;
  friend auto operator<=>(const Holder&, const Holder&) = default;
};

// Every holder of GPU units in the cluster, sorted.
std::vector<Holder> holdersAt(const Cluster& cluster);

inline constexpr Timestamp kSecondsPerHour = 3600;
inline constexpr Timestamp kSecondsPerDay = 86400;
// The UTC hour / day a moment falls in.
inline Timestamp hourOf(Timestamp t) { return t - ((t % kSecondsPerHour) + kSecondsPerHour) % kSecondsPerHour; }
inline Timestamp dayOf(Timestamp t) { return t - ((t % kSecondsPerDay) + kSecondsPerDay) % kSecondsPerDay; }

// Unit-seconds of one holder in one UTC hour.
struct UsageBucket {
  Timestamp hour = 0;  // start of the UTC hour
  Holder holder;
  std::int64_t unitSeconds = 0;
  friend bool operator==(const UsageBucket&, const UsageBucket&) = default;
};

// What `holders` (held throughout) accrue over [from, to), split at UTC hour
// boundaries; nothing when to <= from.
std::vector<UsageBucket> accrue(const std::vector<Holder>& holders, Timestamp from, Timestamp to);

// Adds `more` into `into`: the same hour and holder sum their unit-seconds.
// The result is sorted by hour, then holder.
void mergeBuckets(std::vector<UsageBucket>& into, const std::vector<UsageBucket>& more);

// The buckets whose hour starts in [since, until).
std::vector<UsageBucket> bucketsIn(const std::vector<UsageBucket>& buckets, Timestamp since, Timestamp until);

// A reservation's billing window, clipped to the period asked for and to
// `now` (the moment of the answer: nothing is billed ahead of the clock, so an
// open window asked about until a future moment ends at now): billing starts
// at activatedAt (never at the request or the pending record) and ends at
// releasedAt; an active or releasing record without releasedAt is open.
// Pending and canceled records bill nothing.
struct BillingWindow {
  std::string id;
  std::string organization;
  std::string project;
  std::string profileId;
  std::string addonId;
  std::string billingReference;
  ReservationState state = ReservationState::Active;
  std::int64_t devices = 0;
  Timestamp from = 0;              // max(activatedAt, since)
  Timestamp until = 0;             // min(releasedAt, until, now)
  bool open = false;               // the record has no releasedAt yet
  std::int64_t deviceSeconds = 0;  // devices x (until - from)
  std::string source;
  friend bool operator==(const BillingWindow&, const BillingWindow&) = default;
};
std::vector<BillingWindow> billingWindows(const Ledger& ledger, Timestamp since, Timestamp until, Timestamp now);

}  // namespace tally::model
