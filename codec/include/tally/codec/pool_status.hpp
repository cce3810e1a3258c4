#pragma once
// A GPUDeviceClass's status as the pool auditor publishes it (the pool's
// dashboard, findings, conditions): the merge patch that writes it and the
// status read back from the class as the API server has it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/codec/result.hpp"
#include "tally/common/condition.hpp"

namespace tally::codec {

struct PoolStatus {
  struct FindingEntry {
    std::string code, message, subject;
    friend bool operator==(const FindingEntry&, const FindingEntry&) = default;
  };
  std::string nodeMode;   // the effective node mode of the pool
  std::string quotaUnit;  // "devices" or "shares": the unit of every *Units figure and of the equation
  std::int64_t healthySchedulableDevices = 0;
  std::int64_t healthySchedulableUnits = 0;
  std::int64_t reservedDevices = 0;
  std::int64_t reservedUnits = 0;
  std::int64_t nonReservedHardQuota = 0;  // in quotaUnit
  std::int64_t spareDevices = 0;
  std::int64_t spareUnits = 0;
  std::int64_t headroom = 0;  // in quotaUnit
  std::string inFlightTransaction;
  std::string gateFailureId;
  std::string lastAuditTime;
  std::vector<FindingEntry> findings;
  std::vector<Condition> conditions;
  friend bool operator==(const PoolStatus&, const PoolStatus&) = default;
  // Equal in all but lastAuditTime and the conditions' lastTransitionTime.
  bool sameAs(const PoolStatus& other) const;
};

// The merge patch of the status subresource that publishes `status` (empty
// strings are removed).
std::string statusPatch(const PoolStatus& status);

// The status of a GPUDeviceClass object (JSON); an absent status is empty.
// `uid`, when given, gets the object's metadata.uid (empty when it has none).
Result<PoolStatus> decodePoolStatus(std::string_view objectJson, std::string* uid = nullptr);

}  // namespace tally::codec
