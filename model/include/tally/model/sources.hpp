#pragma once
// Unknown vs not configured (SPEC 3.6), said once for the extender, the
// controller and tallyctl: a source nobody configured holds nothing and is
// never stale; one that is configured but not read, or not confirmed within
// the bound, is unknown; a pool that needs a source it cannot read (an
// organization holding a reservation add-on of the pool while no ledger is
// configured) fails closed, and a pool that needs none is not affected.

#include <cstdint>
#include <string>
#include <vector>

#include "tally/model/cluster.hpp"

namespace tally::model {

enum class SourceState {
  NotConfigured,  // no source of the kind is configured: it holds nothing, known
  Unsynced,       // configured, not read yet (or its last read failed before any revision)
  Stale,          // configured and read, but not confirmed current within the bound
  Current,
};
std::string_view toString(SourceState state);

// The state of the kind's source at `now`, with caches older than
// `staleAfterSeconds` stale.
SourceState sourceState(const Cluster& cluster, Kind kind, Timestamp now, Timestamp staleAfterSeconds);

// The flags that configure the reservation ledger, for messages that name
// what is missing (the same on tally-extender, tally-controller and tallyctl).
inline constexpr std::string_view kLedgerFlags = "--ledger-dir or --ledger-configmap";

// An organization's assignment of a reservation add-on of a pool: what only
// the ledger can account for.
struct HeldReservation {
  std::string organization;
  std::string addonId;
  std::int64_t devices = 0;  // what the add-on grants the organization
};

// Every reservation add-on of `pool` that an organization holds (quantity > 0,
// the add-on defined in billing-plans and a reservation add-on of the pool; a
// disabled one too: the organization still holds what it was granted).
std::vector<HeldReservation> heldReservations(const Cluster& cluster, const DeviceClass& pool);

// Whether the pool's audit needs the ledger: an organization holds a
// reservation add-on of it. A pool without one is not affected by a ledger
// that is not configured.
bool needsLedger(const Cluster& cluster, const DeviceClass& pool);

}  // namespace tally::model
