// libFuzzer target: arbitrary bytes as what the controller's webhooks read
// past the AdmissionReview envelope. Bytes that decode as an AdmissionReview
// (runtime::admission::decodeAdmissionReview, as every webhook's door does)
// have their object and oldObject read; other bytes are read as one object.
// Each object goes through every reader the webhooks run (codec/
// admission_objects.hpp and the kinds' codecs): the VMI's devices, the pod's
// generateName and required node affinity, the GPUDevice, its members and
// finalizer, the Organization, the class's acknowledgements. What the webhooks
// send back built from what was read must hold: a valid object's gpus entries
// and the pin's values are valid JSON. Seeds:
// codec/fuzz/admission-objects-corpus.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tally/codec/admission_objects.hpp"
#include "tally/codec/codecs.hpp"
#include "tally/codec/json_text.hpp"
#include "tally/runtime/admission/review.hpp"

namespace {

using namespace tally;

constexpr std::string_view kReleaseFinalizer = "gpu.tally.dev/release";  // controller/device_binder.hpp
constexpr std::string_view kNode = "gpu-h200-01";

bool validJson(simdjson::dom::parser& parser, std::string_view text) {
  simdjson::dom::element element;
  return parser.parse(text.data(), text.size()).get(element) == simdjson::SUCCESS;
}

void readObject(const simdjson::padded_string& object, std::string_view ns, std::string_view name) {
  const std::string_view text(object.data(), object.size());
  simdjson::dom::parser dom;
  const bool valid = validJson(dom, text);

  // The VMI webhook: the codec, then spec.domain.devices, whose gpus entries
  // it sends back in its patch.
  (void)codec::decodeText<codec::VirtualMachineInstanceCodec>(text);
  codec::DomainDevices domain = codec::readDomainDevices(object);
  if (domain.hasDevices && !domain.hasDomain) __builtin_trap();
  std::string gpus = "[";
  for (const auto& [gpuName, raw] : domain.gpus) {
    if (gpus.size() > 1) gpus += ",";
    gpus += raw;
  }
  gpus += "]";
  if (valid && domain.error.empty() && !validJson(dom, gpus)) __builtin_trap();

  // The pod webhooks: the codec, a generateName pod accepted unnamed, then
  // the required node affinity the pin patches, and the pin's values.
  auto named = codec::decodeAdmittedPod(object, ns, name, {});
  auto generated = codec::decodeAdmittedPod(object, ns, name, {.allowGenerateName = true});
  if (named.error.empty() && !generated.error.empty()) __builtin_trap();
  codec::RequiredAffinity affinity = codec::readRequiredAffinity(object, kNode);
  if (affinity.missing != codec::RequiredAffinity::Missing::Nothing && !affinity.terms.empty()) __builtin_trap();
  if (affinity.error.empty()) {
    for (const auto& edit : codec::nodePinEdits(affinity, kNode)) {
      if (!validJson(dom, edit.valueJson)) __builtin_trap();
    }
  }

  // The placement door's marker on a pod naming claims: edits of valid JSON,
  // two of them (requests and limits) unless resources is added whole.
  codec::ContainerResourceEdits marker = codec::firstContainerResourceEdits(object, "gpu.tally.dev/claims", "1");
  if (marker.error.empty()) {
    if (marker.edits.empty() || marker.edits.size() > 2) __builtin_trap();
    for (const auto& edit : marker.edits) {
      if (!validJson(dom, edit.valueJson)) __builtin_trap();
    }
  } else if (!marker.edits.empty()) {
    __builtin_trap();
  }

  // The GPUDevice webhook.
  auto device = codec::decodeAdmittedGpuDevice(object, ns, name, "created");
  if (device.error.empty() && !ns.empty() && device.value.ns.empty()) __builtin_trap();
  (void)codec::rawMember(object, "spec");
  (void)codec::rawMember(object, "status");
  (void)codec::holdsFinalizer(object, kReleaseFinalizer);

  // The claim door: a claim of a template (generateName) is read unnamed.
  auto claim = codec::decodeAdmittedResourceClaim(object, ns, name);
  if (claim.error.empty() && !ns.empty() && claim.value.ns.empty()) __builtin_trap();

  // The Organization and GPUDeviceClass webhooks.
  auto org = codec::decodeAdmittedOrganization(object, ns, name, "new");
  if (org.error.empty() && !name.empty() && org.value.name.empty()) __builtin_trap();
  auto acks = codec::decodeAcknowledgements(text);
  if (!acks && acks.error().message.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(bytes), size);
  runtime::admission::DecodeOptions options;
  options.maxBodyBytes = 1 << 20;
  auto request = runtime::admission::decodeAdmissionReview(body, options);
  if (!request) {
    readObject(simdjson::padded_string(body), "tenant-a", "");
    return 0;
  }
  if (request->hasObject()) readObject(request->object, request->namespace_, request->name);
  if (request->hasOldObject()) {
    readObject(request->oldObject, request->namespace_, request->name);
    // An UPDATE compares members of the two (the GPUDevice webhook's immutable spec).
    (void)(codec::rawMember(request->object, "spec") == codec::rawMember(request->oldObject, "spec"));
  }
  return 0;
}
