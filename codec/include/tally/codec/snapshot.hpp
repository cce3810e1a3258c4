#pragma once
// A snapshot is a Kubernetes List (what `kubectl get ... -o json` prints) whose
// items may be of any kind. Known kinds are decoded into one model::Cluster;
// other kinds are skipped and counted.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "tally/codec/objects.hpp"
#include "tally/codec/result.hpp"
#include "tally/model/cluster.hpp"

namespace tally::codec {

// The kind of an item: its own apiVersion/kind, or those a typed list
// (NodeList, ...) implies for items that carry none.
struct TypeMeta {
  std::string apiVersion;
  std::string kind;
};

struct Snapshot {
  model::Cluster cluster;
  std::map<std::string, std::size_t> decoded;  // kind -> items decoded
  std::map<std::string, std::size_t> skipped;  // kind -> items skipped
};

// What a snapshot is decoded against: configuration, not content.
struct SnapshotOptions {
  BillingPlansLocation billingPlans;  // the one ConfigMap read as the add-on catalogue
};

// Decodes one object by its apiVersion/kind and adds it to the cluster. Items of
// kinds the model does not read (and ConfigMaps other than the billing plans)
// are counted in `snapshot.skipped`. A second object with the same key is an error.
Status addObject(Snapshot& snapshot, simdjson::ondemand::value json, const TypeMeta& implied = {},
                 const SnapshotOptions& options = {});

// Parses a List (or a single object) into a snapshot. The cluster's clock and
// cache states are left for the caller to set.
Result<Snapshot> loadSnapshot(std::string_view json, const SnapshotOptions& options = {});

}  // namespace tally::codec
