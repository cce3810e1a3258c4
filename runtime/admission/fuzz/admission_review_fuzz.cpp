// Fuzz target: arbitrary bytes as an AdmissionReview body. A body that
// decodes is answered and its raw objects parsed again, as a handler would.

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tally/common/json.hpp"
#include "tally/runtime/admission/review.hpp"

using namespace tally::runtime::admission;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(bytes), size);
  DecodeOptions options;
  options.maxBodyBytes = 1 << 20;
  auto request = decodeAdmissionReview(body, options);
  if (!request) return 0;
  simdjson::ondemand::parser parser;
  for (const auto* raw : {&request->object, &request->oldObject, &request->options}) {
    if (raw->size() == 0) continue;
    simdjson::ondemand::document doc;
    if (parser.iterate(*raw).get(doc)) continue;
    std::string_view name;
    if (!doc.at_pointer("/metadata/name").get_string().get(name) && name.size() > (1u << 20)) return 0;
  }
  JsonPatch patch;
  patch.add(JsonPatch::pointer({"metadata", "labels", request->name}), tally::jsonString(request->uid));
  AdmissionResponse response = AdmissionResponse::mutate(std::move(patch));
  response.warnings.push_back(request->userInfo.username);
  (void)encodeAdmissionReview(request->uid, response);
  return 0;
}
