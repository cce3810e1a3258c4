#pragma once
// The readers the controller's admission webhooks run on the objects of an
// AdmissionReview (request.object, request.oldObject: raw JSON anyone who may
// create or update the object wrote), beside the kinds' codecs: the parts of a
// VMI, a Pod, a GPUDevice and a GPUDeviceClass a webhook reads or patches, and
// the objects it decodes with the request's namespace and name. Pure: bytes in,
// values out (codec/fuzz/admission_objects_fuzzer.cpp runs each of them).

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tally/codec/objects.hpp"
#include "tally/codec/result.hpp"
#include "tally/model/objects.hpp"

namespace tally::codec {

// --- VirtualMachineInstance (the VMI webhook) --------------------------------

// What the VMI's spec.domain.devices holds: each gpus[] entry as raw JSON by
// name (entries Tally does not write are kept as they are).
struct DomainDevices {
  bool hasDomain = false;
  bool hasDevices = false;
  std::vector<std::pair<std::string, std::string>> gpus;  // name, raw JSON
  std::string error;
};
DomainDevices readDomainDevices(const simdjson::padded_string& json);

// --- Pod (the launcher-pod and GPU-pod webhooks) -----------------------------

inline constexpr std::string_view kRequiredNodeAffinity = "requiredDuringSchedulingIgnoredDuringExecution";

// What the pin needs to know of spec.affinity.nodeAffinity.required...: the
// first level that is absent (or null), else every term.
struct RequiredAffinity {
  enum class Missing { Nothing, Affinity, NodeAffinity, Required, Terms };
  struct Term {
    bool empty = true;  // no matchExpressions and no matchFields: it matches no node
    bool hasMatchFields = false;
    bool pinned = false;  // carries exactly the pin's expression
  };
  Missing missing = Missing::Affinity;
  std::vector<Term> terms;
  std::string error;  // set: the pod's JSON is not what a Pod is
};
// The pod's required node affinity; a term is pinned when one of its
// matchFields is metadata.name In [node].
RequiredAffinity readRequiredAffinity(const simdjson::padded_string& json, std::string_view node);

// One operation of the JSON Patch a webhook answers: add valueJson at path (a
// JSON Pointer), or remove path.
struct PatchEdit {
  enum class Op { kAdd, kRemove };
  Op op = Op::kAdd;
  std::string path;
  std::string valueJson;  // empty for kRemove
  friend bool operator==(const PatchEdit&, const PatchEdit&) = default;
};

// The edits that make every term of `affinity` require `node` (the
// expression readRequiredAffinity finds pinned), none when each does. A term
// that matches no node is left so: pinning it would let the pod run where its
// own affinity never allowed it.
std::vector<PatchEdit> nodePinEdits(const RequiredAffinity& affinity, std::string_view node);
// spec.nodeName removed (the node moves into the affinity), spec.schedulerName set.
PatchEdit nodeNameRemoval();
PatchEdit schedulerNameEdit(std::string_view scheduler);

// The edits that make the pod's first container request and limit `resource`
// at `quantity` (both, as an extended resource must), creating resources,
// requests and limits where they are absent. An error when the pod's JSON has
// no first container to edit.
struct ContainerResourceEdits {
  std::vector<PatchEdit> edits;
  std::string error;
};
ContainerResourceEdits firstContainerResourceEdits(const simdjson::padded_string& json, std::string_view resource,
                                                   std::string_view quantity);

// --- GPUDevice, Organization and the created Pod (their webhooks) -----------

// An object of the review decoded by its kind's codec, with the request's
// namespace and name where the object carries none.
template <class T>
struct AdmittedObject {
  T value;
  std::string error;  // set: the object could not be read
};
// A created Pod, read with `options` (a generateName pod with
// allowGenerateName: its name stays empty unless the request names it).
// error: "the created Pod cannot be read: ..."
AdmittedObject<model::Pod> decodeAdmittedPod(const simdjson::padded_string& json, std::string_view requestNamespace,
                                             std::string_view requestName, const PodDecodeOptions& options);
// error: "the <which> GPUDevice cannot be read: ..."
AdmittedObject<model::GpuDevice> decodeAdmittedGpuDevice(const simdjson::padded_string& json,
                                                         std::string_view requestNamespace,
                                                         std::string_view requestName, std::string_view which);
// error: "the <which> Organization <ns>/<name> cannot be read: ..."
AdmittedObject<model::Organization> decodeAdmittedOrganization(const simdjson::padded_string& json,
                                                               std::string_view requestNamespace,
                                                               std::string_view requestName, std::string_view which);

// A created ResourceClaim (from a template: generateName, no name yet).
// error: "the created ResourceClaim cannot be read: ..."
AdmittedObject<model::ResourceClaim> decodeAdmittedResourceClaim(const simdjson::padded_string& json,
                                                                 std::string_view requestNamespace,
                                                                 std::string_view requestName);

// The raw JSON of a top-level member ("spec", "status"); nullopt when absent.
std::optional<std::string> rawMember(const simdjson::padded_string& json, std::string_view member);

// Whether metadata.finalizers holds `finalizer` (false when unreadable).
bool holdsFinalizer(const simdjson::padded_string& json, std::string_view finalizer);

// --- GPUDeviceClass (the class webhook) --------------------------------------

struct Acknowledgement {
  std::string failureId, role, identity, at, note;
  friend bool operator==(const Acknowledgement&, const Acknowledgement&) = default;
};

// spec.gateAcknowledgements of a GPUDeviceClass object (JSON); an error's
// message names what cannot be read.
Result<std::vector<Acknowledgement>> decodeAcknowledgements(std::string_view objectJson);

}  // namespace tally::codec
