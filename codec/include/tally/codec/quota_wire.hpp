#pragma once
// The quota objects and Organization status as Tally reads them back and
// writes them: what an HRQ or ResourceQuota holds of Tally's keys (spec.hard,
// and the keys its field manager owns through server-side apply), the apply
// bodies of plan-quota and project-quota, and the merge patch of an
// Organization's status.quotaUsage.accelerators.

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "tally/codec/result.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec {

// What the API server holds of one quota object, as far as Tally's keys go.
struct ObservedQuota {
  bool exists = false;
  std::map<std::string, std::string> hard;  // spec.hard as written (quantities)
  std::set<std::string> owned;              // spec.hard keys the field manager applied
};

// Reads spec.hard and the keys of spec.hard `fieldManager` owns through
// server-side apply (metadata.managedFields) from an HRQ or ResourceQuota.
Result<ObservedQuota> observeQuota(std::string_view json, std::string_view fieldManager);

// The apply body of an HRQ plan-quota or a ResourceQuota project-quota holding
// only `hard` (no spec at all when it is empty: Tally then owns no key).
std::string hrqApplyBody(std::string_view ns, const model::ResourceList& hard);
std::string resourceQuotaApplyBody(std::string_view ns, const model::ResourceList& hard);

// The merge patch of an Organization's status subresource that makes
// status.quotaUsage.accelerators `desired` (profiles no longer there: null).
std::string acceleratorStatusPatch(const std::map<std::string, model::AcceleratorUsage>& observed,
                                   const std::map<std::string, model::AcceleratorUsage>& desired);

}  // namespace tally::codec
