#pragma once
// Model objects for the tests of the state and its users: a GPU node, a
// tenant namespace, a GPU pod.

#include <cstdint>
#include <string>

#include "tally/model/objects.hpp"

namespace tally::state::testing {

inline constexpr const char* kGpu = "nvidia.com/GH100_H200_SXM_141GB";

inline model::Node gpuNode(std::string name, std::int64_t devices = 8, std::string resource = kGpu) {
  model::Node n;
  n.name = std::move(name);
  n.ready = true;
  n.allocatable.set(resource, devices);
  return n;
}

inline model::Namespace tenant(std::string name) {
  model::Namespace ns;
  ns.tree[name] = 0;
  ns.name = std::move(name);
  return ns;
}

// Running when bound to `node`, Pending otherwise; uid "uid-<name>".
inline model::Pod gpuPod(std::string ns, std::string name, std::int64_t count, std::string node = "",
                         std::string resource = kGpu) {
  model::Pod p;
  p.ns = std::move(ns);
  p.uid = "uid-" + name;
  p.name = std::move(name);
  p.nodeName = std::move(node);
  p.phase = p.nodeName.empty() ? model::PodPhase::Pending : model::PodPhase::Running;
  model::ResourceList r;
  r.set(resource, count);
  p.containers.push_back(r);
  return p;
}

// A passthrough VM class of `resource`, maxCount 8.
inline model::DeviceClass vmClass(std::string name = "h200", std::string resource = kGpu) {
  model::DeviceClass c;
  c.name = std::move(name);
  c.workload = model::Workload::Vm;
  c.allocation = model::Allocation::Passthrough;
  c.resourceName = std::move(resource);
  c.nodeMode = model::NodeMode::VmPassthrough;
  c.maxCount = 8;
  return c;
}

}  // namespace tally::state::testing
