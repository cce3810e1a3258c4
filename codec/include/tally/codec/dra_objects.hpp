#pragma once
// simdjson on-demand decoders of the resource.k8s.io/v1 objects Tally reads
// (ResourceSlice, ResourceClaim, DeviceTaintRule) into the model's slim DRA
// values. Like every decoder here: only the fields the model needs, any field
// order, errors naming the object and the field path.

#include <simdjson.h>

#include "tally/codec/objects.hpp"
#include "tally/codec/result.hpp"
#include "tally/model/dra_objects.hpp"

namespace tally::codec {

Result<model::ResourceSlice> decodeResourceSlice(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
Result<model::ResourceClaim> decodeResourceClaim(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);
// A claim at its CREATE: one from a pod's template has only generateName
// (its name is then empty).
Result<model::ResourceClaim> decodeResourceClaimAtCreate(simdjson::ondemand::value json);
Result<model::DeviceTaintRule> decodeDeviceTaintRule(simdjson::ondemand::value json, ObjectMeta* meta = nullptr);

}  // namespace tally::codec
