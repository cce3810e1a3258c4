#pragma once
// What one request reads: the cluster state's snapshot (tally/state/), whose
// one part is the extender's own, the bound GPU pods per node that preemption
// needs to find victims by UID. A row is replaced only when a pod on it
// changed, so successive snapshots share the rest.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tally/common/cow_map.hpp"
#include "tally/state/snapshot.hpp"

namespace tally::extender {

using ExtenderSnapshot = state::Snapshot;

// Non-terminal pods bound to one node (GPU pods only: the rest use no units),
// each shared by every row and snapshot that holds it: a row rebuilt when one
// of its pods changed copies pointers, not the pods that did not change.
using BoundPods = std::vector<std::shared_ptr<const model::Pod>>;
using BoundPodRows = CowMap<std::shared_ptr<const BoundPods>>;

// The snapshot's part of that type (CacheWriter's extension publishes it).
const BoundPodRows& podsOnNode(const ExtenderSnapshot& snap);
const model::Pod* boundPod(const ExtenderSnapshot& snap, std::string_view node, std::string_view uid);
// "tally-extender is not ready: the Pod, GpuDevice caches are not synced yet; ..."
std::string notReadyReason(const ExtenderSnapshot& snap);

}  // namespace tally::extender
