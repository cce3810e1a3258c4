#pragma once
// What a kind reads from its labels and annotations, written once for the JSON
// and the protobuf decoders.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/codec/result.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec::detail {

// The workload-mode labels of a Node.
void applyNodeLabel(model::Node& node, std::string_view key, std::string_view value);
// The inventory annotation of a Node (an error names the field inside it).
Status applyNodeAnnotation(model::Node& node, std::string_view key, std::string_view value);
// HNC tree labels and entitlement labels of a Namespace.
Status applyNamespaceLabel(model::Namespace& ns, std::string_view key, std::string_view value);
// Kubernetes defaults a container's request to its limit when only the limit
// is set, per resource; extended resources (all GPUs) must set both equal.
void defaultRequestsToLimits(model::ResourceList& requests, const model::ResourceList& limits);
// A pod's claims from templates take the names status.resourceClaimStatuses
// gives them (entry name -> claim made for it; the claim's own name wins).
void resolveTemplateClaims(model::Pod& pod, const std::vector<std::pair<std::string, std::string>>& generated);

}  // namespace tally::codec::detail
