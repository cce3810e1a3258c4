#pragma once
// The audit (SPEC 3.5): per pool, fail closed on any finding; a failed audit
// closes the pool's creation gate until findings clear and two people ack.

#include <string>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/pool.hpp"

namespace tally::model {

enum class FindingCode {
  MissingLedgerRecord,
  UnknownAddon,
  StaleCapacity,
  HardQuotaAboveCapacity,
  DuplicateReservationId,
  ProfileModeMismatch,
  ActiveAlert,
  StatusDisagreement,
  MultipleTransactions,
  InvalidRecord,
  SharedNodeWithoutInventory,  // informational: such a node serves no shared units
};
std::string_view toString(FindingCode code);
// Whether the finding closes the gate (every code but the informational ones).
bool failsClosed(FindingCode code);

struct Finding {
  FindingCode code;
  std::string message;
  friend bool operator==(const Finding&, const Finding&) = default;
};

struct AuditOptions {
  Timestamp staleAfterSeconds = 300;  // caches older than this are stale
};

std::vector<Finding> auditPool(const Cluster& cluster, const DeviceClass& pool, const AuditOptions& options = {});

struct GateState {
  bool open = true;
  std::string failureId;  // the failure that closed it (kept until acknowledged)
  std::string reason;
  friend bool operator==(const GateState&, const GateState&) = default;
};

// The creation gate: closed while failing findings exist; after they clear it
// reopens only when two distinct identities, one "product" and one "sre",
// acknowledged the failure id on the class.
GateState evaluateGate(const DeviceClass& pool, const std::vector<Finding>& findings, Timestamp now);

}  // namespace tally::model
