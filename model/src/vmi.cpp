#include "tally/model/vmi.hpp"

#include "tally/model/audit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "lookup.hpp"
#include "tally/model/units.hpp"
#include "without_devices.hpp"

namespace tally::model {

using detail::findClass;
using detail::namespacedRange;

std::string templateDeviceName(std::string_view vmi, std::string_view token, std::size_t index) {
  return fmt::format("{}-{}-{}", vmi, token.substr(0, 8), index);
}

namespace {

std::string vmiSubject(std::string_view ns, std::string_view name) { return fmt::format("vmi/{}/{}", ns, name); }

std::string_view attachmentNamespace(const GpuDevice& d) {
  return d.attachedTo.ns.empty() ? std::string_view(d.ns) : std::string_view(d.attachedTo.ns);
}

const VirtualMachineInstance* vmiNamed(const Cluster& cluster, std::string_view ns, std::string_view name) {
  auto it = cluster.vmis.find(objectKey(ns, name));
  return it == cluster.vmis.end() ? nullptr : &it->second;
}

std::string deviceSubject(const GpuDevice& d) { return fmt::format("gpudevice/{}/{}", d.ns, d.name); }

// The node the whole set fits on when its placed held devices move (see
// planVmiStart), filling s.move; nullopt when they stay: their node lacked
// more than room (`refused` has other codes), one of them is attached (a VM
// runs on it: never moved), or no node holds the whole set either.
std::optional<std::string> movedSet(const Cluster& cluster, detail::WithoutDevices& budgets,
                                    const VirtualMachineInstance& vmi, const Decision& refused, VmiStart& s,
                                    const std::vector<const GpuDevice*>& members, std::vector<DeviceTemplate> rest) {
  const bool roomOnly = std::all_of(refused.refusals.begin(), refused.refusals.end(),
                                    [](const Refusal& r) { return r.code == Code::NodeInsufficient; });
  if (!roomOnly) return std::nullopt;
  std::vector<std::string> move;
  for (const GpuDevice* m : members) {
    if (!holdsNodeUnits(*m)) continue;  // in `rest` already
    if (attached(*m)) return std::nullopt;
    rest.push_back(DeviceTemplate{m->className, m->count});
    budgets.leaveOut(*m);  // its units count in its budget already
    move.push_back(m->name);
  }
  Placement p = placeDeviceSet(cluster, budgets, DeviceOrder{vmi.ns, s.subject, rest});
  if (!p.decision.allowed() || !p.node) return std::nullopt;
  s.move = std::move(move);
  return p.node;
}

}  // namespace

bool holdsAttachment(const VirtualMachineInstance& vmi, const GpuDevice& device) {
  if (!attached(device) || vmi.ns != attachmentNamespace(device) || vmi.name != device.attachedTo.name) return false;
  if (!device.attachedTo.uid.empty()) return vmi.uid == device.attachedTo.uid;
  if (!device.attachToken.empty()) return vmi.attachToken == device.attachToken;
  return true;  // attached by name alone (not by the VM door): the name is all there is
}

const VirtualMachineInstance* attachmentVmi(const Cluster& cluster, const GpuDevice& device) {
  if (!attached(device)) return nullptr;
  const VirtualMachineInstance* vmi = vmiNamed(cluster, attachmentNamespace(device), device.attachedTo.name);
  return vmi && holdsAttachment(*vmi, device) ? vmi : nullptr;
}

std::string attachmentHolder(const Cluster& cluster, const GpuDevice& device, AttachWindow window) {
  if (!attached(device)) return {};
  const std::string holder = vmiSubject(attachmentNamespace(device), device.attachedTo.name);
  if (attachmentVmi(cluster, device)) return holder;
  if (device.attachedTo.uid.empty() && !device.attachToken.empty() && window.now < device.attachedAt + window.bound) {
    return holder + " (starting)";
  }
  return {};
}

VmiStart planVmiStart(const Cluster& cluster, const CapacityView& view, const VirtualMachineInstance& vmi,
                      std::string_view token, AttachWindow window) {
  VmiStart s;
  s.subject = vmiSubject(vmi.ns, vmi.name);
  for (Kind kind :
       {Kind::Node, Kind::DeviceClass, Kind::GpuDevice, Kind::Pod, Kind::VirtualMachineInstance, Kind::KubeVirt}) {
    if (!cluster.synced(kind)) {
      s.decision.refuse(Code::CacheNotSynced,
                        fmt::format("{} refused: the {} cache is not synced yet", s.subject, toString(kind)));
      return s;
    }
  }
  // Members that exist (held devices, and template devices of this attachment
  // an earlier call created), and the GPUs of the whole set per class.
  std::vector<const GpuDevice*> members;
  std::vector<DeviceTemplate> newItems;
  std::map<std::string, std::int64_t> perClass;
  std::map<std::string, std::pair<std::string, std::int64_t>> memberClass;  // name -> class, count
  std::set<std::string> seen;
  for (const auto& name : vmi.heldDevices) {
    if (!seen.insert(name).second) {
      s.decision.refuse(Code::DeviceAttached,
                        fmt::format("{} names held GPUDevice {} twice in {}", s.subject, name, kAnnotationVmiDevices));
      continue;
    }
    s.set.push_back(name);
    auto it = cluster.devices.find(objectKey(vmi.ns, name));
    if (it == cluster.devices.end()) {
      s.decision.refuse(Code::DeviceUnknown,
                        fmt::format("{} names held GPUDevice {}, which does not exist in namespace {} (a VM holds "
                                    "only devices of its own namespace)",
                                    s.subject, name, vmi.ns));
      continue;
    }
    const GpuDevice& d = it->second;
    if (d.deleting || d.phase == DevicePhase::Released) {
      s.decision.refuse(Code::DeviceUnavailable,
                        fmt::format("{} names {}, which is being released", s.subject, deviceSubject(d)));
      continue;
    }
    if (d.phase == DevicePhase::Lost) {
      s.decision.refuse(Code::DeviceUnavailable,
                        fmt::format("{} names {}, which is Lost (node {} no longer holds its {} GPU(s)); it serves "
                                    "no VM until it is Bound again",
                                    s.subject, deviceSubject(d), d.node, d.count));
      continue;
    }
    // Attached with this token to this VMI, and no uid recorded yet (a uid
    // would be an earlier VMI's of the same name).
    const bool ours = attached(d) && !token.empty() && d.attachToken == token && d.attachedTo.uid.empty() &&
                      d.attachedTo.name == vmi.name && attachmentNamespace(d) == vmi.ns;
    if (!ours) {
      if (std::string holder = attachmentHolder(cluster, d, window); !holder.empty()) {
        s.decision.refuse(Code::DeviceAttached,
                          fmt::format("{} names {}, which is attached to {}; a device serves one VM at a time",
                                      s.subject, deviceSubject(d), holder));
        continue;
      }
      s.attach.push_back(name);
    }
    members.push_back(&d);
    perClass[d.className] += d.count;
    memberClass[name] = {d.className, d.count};
  }
  for (std::size_t i = 0; i < vmi.deviceTemplates.size(); ++i) {
    const DeviceTemplate& t = vmi.deviceTemplates[i];
    std::string name = templateDeviceName(vmi.name, token, i);
    s.set.push_back(name);
    memberClass[name] = {t.className, t.count};
    perClass[t.className] += t.count;
    auto it = cluster.devices.find(objectKey(vmi.ns, name));
    if (it == cluster.devices.end()) {
      s.create.push_back(TemplateDevice{name, t.className, t.count});
      newItems.push_back(t);
    } else if (it->second.fromTemplate && it->second.attachToken == token && !it->second.deleting) {
      members.push_back(&it->second);
    } else {
      s.decision.refuse(Code::DeviceUnavailable,
                        fmt::format("{}: its device template {} would be GPUDevice {}/{}, which exists already and "
                                    "is not this VM's",
                                    s.subject, i, vmi.ns, name));
    }
  }
  if (!s.decision.allowed() || s.set.empty()) return s;

  for (const auto& [className, count] : perClass) {
    const DeviceClass* cls = findClass(cluster, className);
    if (!cls) {
      s.decision.refuse(Code::ClassUnknown,
                        fmt::format("{} names GPU class {}, which does not exist", s.subject, className));
      continue;
    }
    if (cls->workload != Workload::Vm) {
      s.decision.refuse(Code::NotPermitted,
                        fmt::format("{} names GPU class {}, which serves pods, not VMs", s.subject, className));
      continue;
    }
    const auto& permitted = cluster.permittedHostDevices;
    const bool listed = permitted && std::any_of(permitted->begin(), permitted->end(),
                                                 [&](const auto& p) { return p.resourceName == cls->resourceName; });
    if (!listed) {
      s.decision.refuse(
          Code::NotPermitted,
          fmt::format("{} needs host device {} (class {}), which {}; add it to spec.configuration.permittedHostDevices."
                      "{} of the KubeVirt CR",
                      s.subject, cls->resourceName, className,
                      permitted ? "the KubeVirt CR does not permit"
                                : "no KubeVirt CR permits: Tally knows no KubeVirt CR (kubevirt.io/v1 kubevirts: none "
                                  "exists, or tally-controller runs without --watch-kubevirt)",
                      cls->allocation == Allocation::Passthrough ? "pciHostDevices" : "mediatedDevices"));
    }
    // A closed gate refuses every new GPU workload, one on held devices too
    // (a running VMI is never stopped: this is its start).
    if (!cls->gateOpen) s.decision.refuse(Code::GateClosed, gateClosedMessage(*cls));
    if (count > cls->maxCount) {
      s.decision.refuse(Code::CountAboveMax,
                        fmt::format("{}'s device set takes {} GPU(s) of class {}; one order may take at most {} "
                                    "(maxCount)",
                                    s.subject, count, className, cls->maxCount));
    }
  }
  if (!s.decision.allowed()) return s;
  if (!newItems.empty()) {
    Decision order = checkDeviceOrder(cluster, view, DeviceOrder{vmi.ns, s.subject + " (device templates)", newItems});
    if (!order.allowed()) {
      s.decision = std::move(order);
      return s;
    }
  }

  // One node for the whole set: the node its placed members hold, with room
  // for the rest; else the best node for all of it.
  std::optional<std::string> pinned;
  std::vector<DeviceTemplate> unplaced = newItems;
  detail::WithoutDevices budgets(cluster, view);
  for (const GpuDevice* m : members) {
    if (holdsNodeUnits(*m)) {
      if (pinned && *pinned != m->node) {
        s.decision.refuse(Code::DeviceUnavailable,
                          fmt::format("{}: its held devices are on nodes {} and {}; one node must hold the whole set",
                                      s.subject, *pinned, m->node));
        return s;
      }
      pinned = m->node;
    } else {
      unplaced.push_back(DeviceTemplate{m->className, m->count});
      budgets.leaveOut(*m);  // a Pending member counts in its budget already
    }
  }
  if (unplaced.empty()) {
    s.node = pinned;
  } else if (pinned) {
    auto node = cluster.nodes.find(*pinned);
    if (node == cluster.nodes.end()) {
      s.decision.refuse(Code::NodeGone,
                        fmt::format("{}: its held devices are on node {}, which is gone", s.subject, *pinned));
      return s;
    }
    std::map<std::string, std::int64_t> demand;
    for (const auto& item : unplaced) demand[item.className] += item.count;
    for (const auto& [className, units] : demand) {
      const DeviceClass* cls = findClass(cluster, className);
      if (auto why = nodeIneligibility(node->second, *cls)) {
        s.decision.refuse(why->code,
                          fmt::format("{}: its held devices are on node {}: {}", s.subject, *pinned, why->message));
        continue;
      }
      const std::int64_t free = freeUnits(node->second, *cls, view);
      if (free < units) {
        s.decision.refuse(Code::NodeInsufficient,
                          fmt::format("{}: its held devices are on node {}, which has {} free unit(s) of class {}; "
                                      "the rest of its set needs {}",
                                      s.subject, *pinned, free, className, units));
      }
    }
    if (s.decision.allowed()) {
      s.node = pinned;
    } else if (auto moved = movedSet(cluster, budgets, vmi, s.decision, s, members, unplaced)) {
      s.decision = {};
      s.node = *moved;
    }
  } else {
    Placement p = placeDeviceSet(cluster, budgets, DeviceOrder{vmi.ns, s.subject, unplaced});
    if (!p.decision.allowed()) {
      s.decision = std::move(p.decision);
      return s;
    }
    if (!p.node) {
      s.decision.refuse(Code::NoSingleNode,
                        fmt::format("{}: no single node has room for its whole device set", s.subject));
      return s;
    }
    s.node = p.node;
  }
  if (!s.decision.allowed()) return s;
  for (const auto& name : s.set) {
    const auto& [className, count] = memberClass[name];
    const DeviceClass* cls = findClass(cluster, className);
    for (std::int64_t k = 0; k < count; ++k) {
      s.gpus.push_back(VmiGpu{count == 1 ? name : fmt::format("{}-{}", name, k), cls->resourceName});
    }
  }
  return s;
}

std::string startingToken(const Cluster& cluster, std::string_view ns, std::string_view vmi, AttachWindow window) {
  std::string token;
  Timestamp newest = 0;
  auto [first, last] = namespacedRange(cluster.devices, ns);
  for (auto it = first; it != last; ++it) {
    const GpuDevice& d = it->second;
    if (!attached(d) || d.attachToken.empty() || !d.attachedTo.uid.empty()) continue;
    if (d.attachedTo.name != vmi || attachmentNamespace(d) != ns) continue;
    if (window.now >= d.attachedAt + window.bound || d.attachedAt < newest) continue;
    newest = d.attachedAt;
    token = d.attachToken;
  }
  return token;
}

bool tokenTaken(const Cluster& cluster, std::string_view ns, std::string_view token) {
  if (token.empty()) return false;
  auto [first, last] = namespacedRange(cluster.devices, ns);
  for (auto it = first; it != last; ++it) {
    if (it->second.attachToken == token && !it->second.attachedTo.uid.empty()) return true;
  }
  return false;
}

std::vector<const GpuDevice*> attachedDevices(const Cluster& cluster, const VirtualMachineInstance& vmi) {
  std::vector<const GpuDevice*> out;
  auto [first, last] = namespacedRange(cluster.devices, vmi.ns);
  for (auto it = first; it != last; ++it) {
    const GpuDevice& d = it->second;
    if (!attached(d) || d.attachedTo.name != vmi.name || attachmentNamespace(d) != vmi.ns) continue;
    if (!countsAgainstBudget(d)) continue;
    const bool byUid = !d.attachedTo.uid.empty() && d.attachedTo.uid == vmi.uid;
    const bool byToken = d.attachedTo.uid.empty() && !d.attachToken.empty() && d.attachToken == vmi.attachToken;
    if (byUid || byToken) out.push_back(&d);
  }
  return out;
}

namespace {

SetNode commonNode(const std::vector<const GpuDevice*>& devices, std::string_view whose) {
  SetNode out;
  for (const GpuDevice* d : devices) {
    if (!holdsNodeUnits(*d)) {
      out.decision.refuse(Code::DeviceUnavailable,
                          fmt::format("{} of {} is {}, on no node yet", deviceSubject(*d), whose, toString(d->phase)));
      return out;
    }
    if (out.node && *out.node != d->node) {
      out.decision.refuse(Code::DeviceUnavailable,
                          fmt::format("the devices of {} are split across nodes {} and {}", whose, *out.node, d->node));
      out.node.reset();
      return out;
    }
    out.node = d->node;
  }
  return out;
}

}  // namespace

SetNode attachedNode(const Cluster& cluster, const VirtualMachineInstance& vmi) {
  const std::string whose = vmiSubject(vmi.ns, vmi.name);
  std::vector<const GpuDevice*> devices = attachedDevices(cluster, vmi);
  if (devices.empty()) {
    SetNode out;
    out.decision.refuse(Code::DeviceUnknown, fmt::format("{} has no GPUDevice attached", whose));
    return out;
  }
  return commonNode(devices, whose);
}

SetNode placedSet(const Cluster& cluster, std::string_view ns, const std::vector<std::string>& set) {
  std::vector<const GpuDevice*> devices;
  for (const auto& name : set) {
    auto it = cluster.devices.find(objectKey(ns, name));
    if (it == cluster.devices.end()) {
      SetNode out;
      out.decision.refuse(Code::DeviceUnknown, fmt::format("GPUDevice {}/{} is not seen yet", ns, name));
      return out;
    }
    devices.push_back(&it->second);
  }
  return commonNode(devices, "the set");
}

AttachmentStep attachmentStep(const Cluster& cluster, const GpuDevice& device, AttachWindow window) {
  AttachmentStep step;
  if (!attached(device) || !cluster.synced(Kind::VirtualMachineInstance)) return step;
  const std::string_view ns = attachmentNamespace(device);
  const std::string who = vmiSubject(ns, device.attachedTo.name);
  const VirtualMachineInstance* vmi = vmiNamed(cluster, ns, device.attachedTo.name);
  auto release = [&](std::string reason) {
    step.action = device.fromTemplate ? AttachmentAction::Delete : AttachmentAction::Detach;
    step.reason = std::move(reason);
    return step;
  };
  if (!device.attachedTo.uid.empty()) {
    if (vmi && vmi->uid == device.attachedTo.uid) return step;
    if (!vmi) return release(fmt::format("{} (uid {}) is gone", who, device.attachedTo.uid));
    return release(fmt::format("{} was recreated: it is uid {} now, the attachment was to uid {}", who, vmi->uid,
                               device.attachedTo.uid));
  }
  if (device.attachToken.empty()) return step;  // attached by name outside the VM door: not ours to change
  if (vmi && vmi->attachToken == device.attachToken && !vmi->uid.empty()) {
    step.action = AttachmentAction::FillUid;
    step.uid = vmi->uid;
    step.reason = fmt::format("{} exists (uid {})", who, vmi->uid);
    return step;
  }
  if (window.now >= device.attachedAt + window.bound) {
    return release(fmt::format("{} did not appear within {} s of the attachment (its create was refused or failed)",
                               who, window.bound));
  }
  step.recheckAt = device.attachedAt + window.bound;
  return step;
}

}  // namespace tally::model

namespace tally::model {

GpuDevice attachedBy(GpuDevice d, const std::string& ns, const std::string& vmi, const std::string& token,
                     std::vector<std::string> set, Timestamp since) {
  d.attachedTo = ObjectRef{ns, vmi, ""};
  d.attachToken = token;
  d.attachSet = std::move(set);
  d.attachedAt = since;
  if (holdsNodeUnits(d)) d.phase = DevicePhase::Attached;
  return d;
}

GpuDevice unplaced(GpuDevice d) {
  d.phase = DevicePhase::Pending;
  d.node.clear();
  return d;
}

GpuDevice detached(GpuDevice d) {
  d.attachedTo = {};
  d.attachToken.clear();
  d.attachSet.clear();
  d.attachedAt = 0;
  if (d.phase == DevicePhase::Attached) d.phase = DevicePhase::Bound;
  return d;
}

GpuDevice attachmentAfter(const GpuDevice& device, const AttachmentStep& step) {
  switch (step.action) {
    case AttachmentAction::FillUid: {
      GpuDevice next = device;
      next.attachedTo.uid = step.uid;
      if (holdsNodeUnits(next)) next.phase = DevicePhase::Attached;
      return next;
    }
    case AttachmentAction::Detach: return detached(device);
    case AttachmentAction::Keep:
    case AttachmentAction::Delete: return device;
  }
  return device;
}

}  // namespace tally::model
