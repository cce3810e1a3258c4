#pragma once
// Pools, reservations and the capacity invariant (SPEC 3.4):
//
//   healthy schedulable devices(P) >= pending+active+releasing reserved devices(P)
//                                   + sum over orgs of non-reserved hard quota(org, P)
//                                   + operator spare(P)
//
// every term in the pool's quota unit (devices; shares for shared pools).

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/gate.hpp"
#include "tally/model/refusal.hpp"

namespace tally::model {

// Where a quantity in the equation comes from.
struct TermSource {
  std::string object;  // e.g. "node/gpu-1", "record/gpu-res-42", "hrq/acme/plan-quota"
  std::int64_t quantity = 0;
  std::string note;
  friend bool operator==(const TermSource&, const TermSource&) = default;
};

struct Term {
  std::int64_t units = 0;
  std::vector<TermSource> sources;
  friend bool operator==(const Term&, const Term&) = default;
};

struct PoolInvariant {
  std::string pool;
  std::string quotaKey;
  std::int64_t unitsPerDevice = 1;
  std::string quotaUnit = "devices";  // the unit of every term: "devices", or "shares" for shared pools
  std::int64_t healthySchedulableDevices = 0;
  Term healthy;               // units of eligible nodes of the pool
  Term reserved;              // pending + active + releasing records
  Term nonReservedHard;       // sum over orgs of HRQ hard minus reservation grants
  Term spare;                 // operator spare
  std::int64_t headroom = 0;  // healthy - (reserved + nonReservedHard + spare)
  // Terms that could not be read (an organization's HRQ missing, an unsynced
  // cache): the equation is unknown and never holds.
  std::vector<std::string> unknown;
  bool holds() const { return unknown.empty() && headroom >= 0; }
  std::string equation() const;  // "8 >= 2 + 5 + 1" style, with the pool named
  friend bool operator==(const PoolInvariant&, const PoolInvariant&) = default;
};

// The invariant's figures as a pool's dashboard shows them (the
// GPUDeviceClass status the auditor writes, tallyctl report): devices are
// whole devices (units / unitsPerDevice, rounded down), and a count that
// came out below zero (an HRQ hard below its reservation grant, say) is
// shown as 0. Headroom keeps its sign: a negative headroom is the broken
// invariant the dashboard exists to show.
struct PoolFigures {
  std::int64_t healthySchedulableDevices = 0, healthySchedulableUnits = 0;
  std::int64_t reservedDevices = 0, reservedUnits = 0;
  std::int64_t nonReservedHardQuota = 0;  // in the pool's quota unit
  std::int64_t spareDevices = 0, spareUnits = 0;
  std::int64_t headroom = 0;
  friend bool operator==(const PoolFigures&, const PoolFigures&) = default;
};
PoolFigures poolFigures(const PoolInvariant& invariant);

// Operator spare in devices: 0 for an empty pool (nothing to keep spare, so a
// sequential node can leave a pool nobody holds); else operatorSpareDevices when
// >= 1; otherwise 1, and 0 only for a one-device pool with singleDevicePilotApproved.
std::int64_t spareDevices(const DeviceClass& cls, std::int64_t poolDevices);

// Units of a reservation-add-on grant for the pool held by an organization
// (quantity x devices of operator-only, devices-only add-ons of that profile).
std::int64_t reservationGrantUnits(const Cluster& cluster, const Organization& org, const DeviceClass& pool);

// Quota keys and amounts one grant of a profile adds to an organization's HRQ:
// devices -> requests.<resourceName>; for shared profiles shares, memoryMiB and
// corePercent -> requests.nvidia.com/gpu, gpumem, gpucores.
ResourceList grantQuota(const DeviceClass& profile, const GpuGrant& grant);

// What an organization's add-on assignments grant, by quota key (the GPU keys
// Tally owns in the HRQ plan-quota). Unknown or disabled add-ons grant nothing.
ResourceList grantedQuota(const Cluster& cluster, const Organization& org);

// The organization's hard quota in the pool's unit. When several pools share one
// quota key, each pool gets what the add-ons grant for its profile plus any part
// of the HRQ hard no add-on explains (counted in every such pool: fail closed).
std::int64_t hardQuotaUnits(const Cluster& cluster, const Organization& org, const DeviceClass& pool);

PoolInvariant evaluateInvariant(const Cluster& cluster, const DeviceClass& pool);

// Whether the organization holds add-ons that grant quota in the pool (its HRQ
// must then be readable for the pool's equation to be known).
bool grantsInPool(const Cluster& cluster, const Organization& org, const DeviceClass& pool);

// Only whole-device VM profiles (passthrough pools) can be reserved, through an
// operator-only add-on granting only devices of exactly that profile. Returns
// what is wrong with the record (its pool or its add-on), if anything.
std::optional<Refusal> reservationMismatch(const Cluster& cluster, const ReservationRecord& record);

// The cluster with one organization's add-ons replaced by `after`'s, and Tally's
// keys of its HRQ plan-quota rewritten from them as the quota controller would.
Cluster withOrganization(const Cluster& cluster, const Organization& after);

// A proposed change to evaluate before it is made.
struct AddRecordChange {
  ReservationRecord record;
};
struct AddonQuantityChange {
  std::string organization;  // Organization name (its namespace holds plan-quota)
  std::string addonId;
  std::int64_t quantity = 0;  // the new quantity
};
struct NodeModeChange {
  std::string node;
  NodeMode expectedMode = NodeMode::Unset;
};
using Change = std::variant<AddRecordChange, AddonQuantityChange, NodeModeChange>;

struct PlanResult {
  std::vector<PoolInvariant> before;  // affected pools, before the change
  std::vector<PoolInvariant> after;   // the same pools, after it
  std::vector<GateState> gates;       // the affected pools' gates before the change
  Decision decision;                  // refused when an invariant breaks or holders remain
};

// plan(change): applies the change to a copy of the cluster and evaluates the
// invariant of every affected pool, with every term and its sources. A record
// replaces the record of the same id (pending -> active counts once) and must
// move along the state machine; a new record must be pending; at most one
// transaction may be in flight per pool; the pool's gate must not be closed by a
// failed audit. A node mode change needs zero holders and both pools' creation
// gates closed.
PlanResult plan(const Cluster& cluster, const Change& change);

// Applies a change to a copy of the cluster (what plan() evaluates).
Cluster applyChange(const Cluster& cluster, const Change& change);

// Holders that keep a node from changing mode: non-terminal pods with a GPU
// request or resource claims, and held devices on the node. Names them.
std::vector<std::string> nodeHolders(const Cluster& cluster, std::string_view node);

}  // namespace tally::model
