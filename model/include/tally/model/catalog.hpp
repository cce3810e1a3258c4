#pragma once
// The catalogue a tenant orders from: for one namespace, every GPU class, whether
// a GPUDevice of it can be ordered there now, the largest count that can, and
// why not when none can. Every answer is checkDeviceOrder's, the GPUDevice
// webhook's own decision, asked for one device of count 1, 2, ... maxCount on
// the same cluster and view: the catalogue never says yes where the door says no.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

struct ClassOption {
  std::string className;
  std::string resourceName;
  Workload workload = Workload::Vm;
  Allocation allocation = Allocation::Passthrough;
  std::int64_t maxCount = 0;
  bool orderable = false;
  // The largest N in 1..maxCount such that every count 1..N is admitted now (0: none).
  std::int64_t largestCount = 0;
  // Not orderable: checkDeviceOrder's refusals for count 1. Orderable below
  // maxCount: its refusals for largestCount + 1 (what stops a larger order).
  std::vector<Refusal> refusals;
};

struct CatalogOptions {
  std::string ns;
  std::vector<ClassOption> classes;  // by class name
};

// The order checkDeviceOrder is asked for: one GPUDevice of `count` GPUs of the
// class in `ns` (the subject names no device: the catalogue orders none).
DeviceOrder catalogOrder(std::string_view ns, std::string_view className, std::int64_t count);

CatalogOptions catalogOptions(const Cluster& cluster, const CapacityView& view, std::string_view ns);

// The option of `className` in `options`; null when the catalogue lists no such class.
const ClassOption* findOption(const CatalogOptions& options, std::string_view className);

}  // namespace tally::model
