#pragma once
// The VM door (SPEC 2.2, 3.6, 5): what a VirtualMachineInstance's device
// references become at its creation, which devices it then holds, and what
// becomes of an attachment once the VMI exists, never appears, or is gone.
//
// An attachment is written on each device of the set (status.attachedTo with
// a token, the whole set and its time) before the VMI exists: at CREATE the
// VMI has no uid, so the VMI carries the token (annotation
// gpu.tally.dev/attachment) until the reconciler records its uid. From then on
// every match of a device to its VMI is by uid.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/admission.hpp"
#include "tally/model/capacity.hpp"
#include "tally/model/cluster.hpp"

namespace tally::model {

// The time an attachment is judged at, and how long one may wait for its VMI
// to appear (seconds). `now` is the caller's clock, not a snapshot's: nothing
// publishes a snapshot while nothing changes.
struct AttachWindow {
  Timestamp now = 0;
  Timestamp bound = 0;
};

// The name of the device the webhook creates for template `index` of the
// VMI: fixed by the attachment's token, so a second call creates nothing new.
std::string templateDeviceName(std::string_view vmi, std::string_view token, std::size_t index);

// Whether the device carries an attachment (a VMI named in status.attachedTo).
inline bool attached(const GpuDevice& d) { return !d.attachedTo.empty(); }

// Whether `vmi` is the one the device's attachment is to: the namespace and
// name it names, and then its uid once recorded; before, the token.
bool holdsAttachment(const VirtualMachineInstance& vmi, const GpuDevice& device);

// The VMI the device's attachment is to, when that VMI exists and is the one:
// by uid once recorded; before, the VMI of that name carrying the token.
const VirtualMachineInstance* attachmentVmi(const Cluster& cluster, const GpuDevice& device);

// Who holds a device another VMI wants: the live attachment's VMI
// ("vmi/ns/name"), or one still starting (no uid yet, the window's bound not
// passed). Empty when the device is free: never attached, or an attachment
// whose VMI is gone or never appeared (the reconciler undoes it). "Gone" is
// as the cluster knows it: a door whose VMI cache may lag the device it just
// read must prove the holder gone before it takes the device (the VM door
// reads the VMI from the API server; holdsAttachment judges what it read).
std::string attachmentHolder(const Cluster& cluster, const GpuDevice& device, AttachWindow window);

// The plan for a VMI's device references at its CREATE, decided before any
// write (a refusal or a dry run writes nothing). `token` is the attachment's
// (the VMI's own annotation when the API server calls again).
struct TemplateDevice {
  std::string name;
  std::string className;
  std::int64_t count = 1;
};
struct VmiStart {
  Decision decision;
  std::string subject;              // "vmi/ns/name"
  std::optional<std::string> node;  // set members placed already hold units there
  std::vector<std::string> attach;  // held devices to attach (not yet attached with the token)
  // Held devices of `attach` whose node has no room for the rest of the set:
  // attached unplaced (Pending, no node), so the binder places the whole set
  // on a node that holds it (`node`, as the plan found it).
  std::vector<std::string> move;
  std::vector<TemplateDevice> create;  // template devices still to create
  std::vector<std::string> set;        // every member: held devices in their order, then templates
  std::vector<VmiGpu> gpus;            // one entry per GPU of the set, in set order
};
// The refusal checks, in order: caches synced; the held devices exist in the
// VMI's namespace, are not being deleted, Lost or Released, and no other VMI
// holds them; every class is one for VMs that the KubeVirt CR permits and whose
// creation gate is open (GateClosed, held devices' classes too: a start is a new
// workload; a running VMI is never stopped by it); each
// class's GPUs of the whole set within its maxCount; the template order passes
// checkDeviceOrder; one node holds the whole set (placed members pin it, and
// it must have room for the rest; else placeDeviceSet finds one for all).
// When the placed members' node lacks the room and none of them is attached
// (a held device no VM runs on is a claim on units of its class, not on a
// node), the whole set is placed anew where it fits and they are moved:
// the binder places held devices best fit, into the last free units of a
// node, so a template added beside one later would otherwise fit by chance.
VmiStart planVmiStart(const Cluster& cluster, const CapacityView& view, const VirtualMachineInstance& vmi,
                      std::string_view token, AttachWindow window);

// The token of an attachment to VMI `ns/vmi` still waiting for it (no uid,
// within the window): a CREATE of that VMI without a token is the same VMI
// retried (by the API server, or by its creator after a webhook call that
// wrote and then failed, on any replica) and takes it as its own. Empty when
// there is none (the newest when several).
std::string startingToken(const Cluster& cluster, std::string_view ns, std::string_view vmi, AttachWindow window);

// Whether an attachment with `token` already recorded its VMI's uid: a VMI
// created with that token in its annotation (copied from an earlier VMI of
// the same name) must get a new one.
bool tokenTaken(const Cluster& cluster, std::string_view ns, std::string_view token);

// The devices attached to `vmi`: by uid, or, before the uid is recorded, by
// name and the VMI's token. By namespace/name.
std::vector<const GpuDevice*> attachedDevices(const Cluster& cluster, const VirtualMachineInstance& vmi);

// The node where every device attached to the VMI holds its units (where its
// launcher must run). Refused when none is attached (DeviceUnknown), a member
// is not placed (DeviceUnavailable), or they are split across nodes.
struct SetNode {
  std::optional<std::string> node;
  Decision decision;
};
SetNode attachedNode(const Cluster& cluster, const VirtualMachineInstance& vmi);

// Whether every member of the attachment `token` of VMI `ns/name` holds units
// on one node: the VMI webhook's wait for the binder. `set` names the members.
SetNode placedSet(const Cluster& cluster, std::string_view ns, const std::vector<std::string>& set);

// What the attachment reconciler does with a device's attachment.
enum class AttachmentAction {
  Keep,     // live, or still waiting for its VMI within the bound
  FillUid,  // the VMI exists and carries the token: record its uid
  Detach,   // a held device whose VMI is gone or never appeared: detach, it stays Bound
  Delete,   // a template device whose VMI is gone or never appeared: release it
};
struct AttachmentStep {
  AttachmentAction action = AttachmentAction::Keep;
  std::string uid;          // FillUid: the VMI's
  std::string reason;       // for the Event: what was found
  Timestamp recheckAt = 0;  // Keep while waiting: when the bound passes
};
// Needs the VMI cache synced (Keep otherwise); `window.bound`: seconds an attachment
// may wait for its VMI to appear.
AttachmentStep attachmentStep(const Cluster& cluster, const GpuDevice& device, AttachWindow window);

// The attach and detach transitions, as the VM door and the binder write them.
// The device attached by the VM door to VMI `ns/vmi` under `token` (its set
// and the time the attachment began): Attached when it holds node units.
GpuDevice attachedBy(GpuDevice device, const std::string& ns, const std::string& vmi, const std::string& token,
                     std::vector<std::string> set, Timestamp since);
// The device without its attachment: Attached becomes Bound, it stays held.
GpuDevice detached(GpuDevice device);
// A held device the VM door moves (VmiStart::move): Pending on no node, so
// the binder places it with the rest of its set.
GpuDevice unplaced(GpuDevice device);
// The device after the attachment reconciler's `step`: FillUid records the
// VMI's uid (Attached when it holds node units), Detach detaches; Keep and
// Delete leave it as it is (a deletion is no status).
GpuDevice attachmentAfter(const GpuDevice& device, const AttachmentStep& step);

}  // namespace tally::model
