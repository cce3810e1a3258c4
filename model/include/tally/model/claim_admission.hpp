#pragma once
// The claim door (SPEC 3.7): whether a ResourceClaim may be created. A claim
// is the DRA form of an order: what it requests is charged to its namespace's
// budget from its creation (claimUsage), so it is checked as a device order
// is: its GPU classes open and not being deleted, the namespace entitled and
// held by an Organization, the pool's free units (never an unknown pool's),
// one node with room for all of it (a claim is allocated on one node), and the
// budgets of the namespace and every ancestor. The namespace decides, not the
// requester: kube-controller-manager creates the claims of a pod's templates.
// Claims admitted and not allocated yet (in the cluster or in flight) are
// demand on their pools: the free units left for a new claim are the pool's
// free units less what they request.

#include <vector>

#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"
#include "tally/model/refusal.hpp"

namespace tally::model {

// `subject` names the claim in messages ("resourceclaim/ns/name").
// `inFlight`: claims this door admitted that the cluster does not hold yet
// (their CREATE not yet seen by the watch): what they request counts as used,
// of the budgets up their namespaces' trees and of their classes' free units,
// so concurrent creates cannot each spend the same last unit.
Decision checkClaimAtCreate(const Cluster& cluster, const CapacityView& view, const ResourceClaim& claim,
                            std::string_view subject, const std::vector<ResourceClaim>& inFlight = {});

}  // namespace tally::model
