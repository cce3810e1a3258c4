#pragma once
// Quota that Tally writes (SPEC 5 "Quota"): the GPU keys of an organization's
// HRQ plan-quota from its add-ons, the project caps of project-specific
// reservations, and the Organization's status.quotaUsage.accelerators read
// back from what HNC reports. The quota controller applies these; the
// add-on door (checkAddonChange) reads grantDuringTransaction.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tally/model/cluster.hpp"
#include "tally/model/refusal.hpp"

namespace tally::model {

// Every quota key Tally owns in plan-quota: requests.<resourceName> of every
// GPUDeviceClass, and the HAMi keys (requests.nvidia.com/gpu, gpumem,
// gpucores) once a shared class exists. An HRQ without a key sets no limit on
// it, so a key nobody granted is owned too and held at 0 (fail closed).
std::vector<std::string> ownedPlanQuotaKeys(const Cluster& cluster);

// What plan-quota's GPU keys should hold for an organization.
struct PlanQuota {
  // Every owned key: what the add-ons grant (quantity x grant), else 0.
  ResourceList hard;
  // Why it cannot be worked out (catalogue or classes unsynced, an add-on the
  // catalogue does not define, a grant of a profile that is no class). Not
  // empty: the quota is unknown and nothing may be rewritten from it.
  std::vector<std::string> unknown;
  bool known() const { return unknown.empty(); }
  friend bool operator==(const PlanQuota&, const PlanQuota&) = default;
};
PlanQuota desiredPlanQuota(const Cluster& cluster, const Organization& org);

// The cap of one project namespace's ResourceQuota project-quota.
struct ProjectCap {
  std::string ns;
  // requests.<resourceName> -> devices of the project's pending, active and
  // releasing reservations of that profile. Empty once every one of them is
  // released or canceled: Tally's keys are then removed.
  ResourceList hard;
  std::vector<std::string> records;  // the records it comes from, by id
  friend bool operator==(const ProjectCap&, const ProjectCap&) = default;
};
// One per project namespace that any project-specific reservation (a record
// whose project is not its organization's namespace) names, in namespace
// order. Records of a profile that is no class set no key (the audit reports
// them). Empty while the ledger is unknown.
std::vector<ProjectCap> projectCaps(const Cluster& cluster);

// status.quotaUsage.accelerators from the HRQ plan-quota's status (what HNC
// enforces), per profile: devices for passthrough and vGPU classes; shares,
// memoryMiB and corePercent for shared ones. A profile appears when HNC
// reports a hard or a use of its keys. Nullopt while it cannot be said: no
// HRQ, or HNC has reported no status.hard yet.
std::optional<std::map<std::string, AcceleratorUsage>> acceleratorStatus(const Cluster& cluster,
                                                                         const Organization& org);

// An add-on increase granting more in `pool` while a reservation transaction
// is in flight there (seed: one capacity transaction per pool at a time).
// While a record is pending its organization is given the hold's grant: the
// record's own add-on may grow that organization's reservation grant up to
// the devices its pending and active records of the pool reserve, and nothing
// else. While one is releasing, no grant grows. Nullopt: nothing in flight, or
// exactly the pending record's grant.
std::optional<Refusal> grantDuringTransaction(const Cluster& cluster, const Organization& before,
                                              const Organization& after, const DeviceClass& pool);

}  // namespace tally::model
