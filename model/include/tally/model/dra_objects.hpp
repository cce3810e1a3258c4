#pragma once
// Slim value types of the Dynamic Resource Allocation objects the model reads
// (resource.k8s.io/v1): ResourceSlices (what a driver publishes), ResourceClaims
// (what tenants ask for and what the scheduler allocated), DeviceTaintRules,
// and the part of a GPUDeviceClass that names a DRA pool. Quantities are whole
// numbers in the quantity's base unit (bytes for memory): the decoder rounds
// a capacity down and a request or consumption up, so what a device offers is
// never overstated and what a claim takes never understated.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tally::model {

// GPUDeviceClass spec.dra: where the pool's devices come from and which
// claims draw on it.
struct DraSelection {
  // The driver whose ResourceSlices publish the devices (spec.driver of the
  // slice, e.g. gpu.nvidia.com). Required.
  std::string driver;
  // The Kubernetes DeviceClass whose requests draw on this pool. Empty: any
  // request whose allocated device is one of the pool's; requests not yet
  // allocated are then charged to the pool only when no class names the
  // request's DeviceClass.
  std::string deviceClassName;
  // Devices of the driver that belong to the pool: every attribute named here
  // equals the device's (the key as the slice writes it, or without its
  // domain). Empty: every device of the driver.
  std::map<std::string, std::string> attributes;
  // For a shared class: the consumable capacity (e.g. "memory") whose amount
  // in share.memoryMiB makes one unit. Empty for whole-device classes.
  std::string shareCapacity;
  friend bool operator==(const DraSelection&, const DraSelection&) = default;
};

enum class DraTaintEffect { None, NoSchedule, NoExecute };

struct DraTaint {
  std::string key;
  std::string value;
  DraTaintEffect effect = DraTaintEffect::NoSchedule;
  friend bool operator==(const DraTaint&, const DraTaint&) = default;
};

// A consumable capacity of a device (capacity[name]).
struct DraCapacity {
  std::int64_t value = 0;
  friend bool operator==(const DraCapacity&, const DraCapacity&) = default;
};

// counters a device consumes from one of its slice's shared counter sets.
struct DraCounterUse {
  std::string counterSet;
  std::map<std::string, std::int64_t> counters;
  friend bool operator==(const DraCounterUse&, const DraCounterUse&) = default;
};

struct DraCounterSet {
  std::string name;
  std::map<std::string, std::int64_t> counters;
  friend bool operator==(const DraCounterSet&, const DraCounterSet&) = default;
};

struct DraDevice {
  std::string name;
  // attributes[name] written as text (string, version, int and bool values alike).
  std::map<std::string, std::string> attributes;
  std::map<std::string, DraCapacity> capacity;
  bool allowMultipleAllocations = false;  // consumable capacity: several claims share the device
  std::vector<DraCounterUse> consumesCounters;
  std::vector<DraTaint> taints;
  std::string nodeName;  // perDeviceNodeSelection: the device's own node
  friend bool operator==(const DraDevice&, const DraDevice&) = default;
};

struct ResourceSlice {
  std::string name;
  std::string driver;
  std::string pool;
  std::int64_t generation = 0;
  std::int64_t resourceSliceCount = 1;
  // Where the devices are: one node, or not tied to one node (allNodes, a node
  // selector, or per device). GPUs are node-local; a slice not on one node
  // serves no pool Tally counts (its devices are a finding, never capacity).
  std::string nodeName;
  bool perDeviceNodeSelection = false;
  std::vector<DraDevice> devices;
  std::vector<DraCounterSet> sharedCounters;
  friend bool operator==(const ResourceSlice&, const ResourceSlice&) = default;
};

// DeviceTaintRule: a taint for the devices its spec.deviceSelector names
// (driver, pool, device; an empty field matches everything).
struct DeviceTaintRule {
  std::string name;
  std::string driver;
  std::string pool;
  std::string device;
  DraTaint taint;
  friend bool operator==(const DeviceTaintRule&, const DeviceTaintRule&) = default;
};

enum class DraAllocationMode { ExactCount, All };

// One alternative of a request (exactly, or one entry of firstAvailable).
struct DraRequestChoice {
  std::string name;  // the subrequest's name; empty for `exactly`
  std::string deviceClassName;
  DraAllocationMode mode = DraAllocationMode::ExactCount;
  std::int64_t count = 1;
  bool adminAccess = false;
  std::map<std::string, std::int64_t> capacity;  // capacity.requests
  friend bool operator==(const DraRequestChoice&, const DraRequestChoice&) = default;
};

// spec.devices.requests[]: `exactly` is one choice, `firstAvailable` several
// in order of preference.
struct DraRequest {
  std::string name;
  std::vector<DraRequestChoice> choices;
  friend bool operator==(const DraRequest&, const DraRequest&) = default;
};

// status.allocation.devices.results[].
struct DraResult {
  std::string request;  // "<request>" or "<request>/<subrequest>"
  std::string driver;
  std::string pool;
  std::string device;
  bool adminAccess = false;
  std::string shareId;
  std::map<std::string, std::int64_t> consumedCapacity;
  friend bool operator==(const DraResult&, const DraResult&) = default;
};

struct ClaimConsumer {
  std::string resource;  // "pods"
  std::string name;
  std::string uid;
  friend bool operator==(const ClaimConsumer&, const ClaimConsumer&) = default;
};

struct ResourceClaim {
  std::string ns;
  std::string name;
  std::string uid;
  std::vector<DraRequest> requests;
  bool allocated = false;  // status.allocation present
  std::vector<DraResult> results;
  std::string allocatedNode;  // from status.allocation.nodeSelector (metadata.name), "" when not node-bound
  std::vector<ClaimConsumer> reservedFor;
  // Created by kube-scheduler for a pod's extended-resource request served by
  // DRA (annotation resource.kubernetes.io/extended-resource-claim: "true"):
  // the pod's request already counts those units.
  bool extendedResource = false;
  bool deleting = false;
  friend bool operator==(const ResourceClaim&, const ResourceClaim&) = default;
};

// The slices of one node as the model counts them: folded from the cluster's
// ResourceSlices (and DeviceTaintRules) by foldDraInventory (model/dra.hpp),
// so a node alone says what it serves a DRA class.
struct DraNodeSlice {
  std::string slice;
  std::string driver;
  std::string pool;
  // Empty when the pool is complete; else why its devices count as unknown
  // ("ResourceSlice pool d/p generation 3: 1 of 2 slice(s) seen").
  std::string unknown;
  std::vector<DraDevice> devices;  // taints of matching DeviceTaintRules added
  std::vector<DraCounterSet> sharedCounters;
  friend bool operator==(const DraNodeSlice&, const DraNodeSlice&) = default;
};

}  // namespace tally::model
