// The AdmissionReview v1 decoder and the response encoder.

#include "tally/runtime/admission/review.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tally/runtime/config.hpp"

namespace tally::runtime::admission {
namespace {

std::string corpus(const std::string& name) {
  std::ifstream in(std::string(TALLY_ADMISSION_CORPUS) + "/" + name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string review(const std::string& request) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":)" + request + "}";
}

const char* const kMinimal = R"({"uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"},)"
                             R"("resource":{"group":"","version":"v1","resource":"configmaps"},"operation":"CREATE"})";

TEST(DecodeAdmissionReview, CreateCarriesEveryRequestField) {
  auto r = decodeAdmissionReview(corpus("create_configmap.json"));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->uid, "0b7f2a3c-1111-4a2b-9c3d-5e6f7a8b9c0d");
  EXPECT_EQ(r->kind, (GroupVersionKind{"", "v1", "ConfigMap"}));
  EXPECT_EQ(r->resource, (GroupVersionResource{"", "v1", "configmaps"}));
  ASSERT_TRUE(r->requestKind.has_value());
  EXPECT_EQ(r->requestKind->kind, "ConfigMap");
  ASSERT_TRUE(r->requestResource.has_value());
  EXPECT_EQ(r->name, "cm");
  EXPECT_EQ(r->namespace_, "ns");
  EXPECT_EQ(r->operation, Operation::kCreate);
  EXPECT_EQ(r->userInfo.username, "kubernetes-admin");
  EXPECT_EQ(r->userInfo.uid, "u-1");
  EXPECT_EQ(r->userInfo.groups, (std::vector<std::string>{"system:masters", "system:authenticated"}));
  EXPECT_FALSE(r->dryRun);
  EXPECT_FALSE(r->hasOldObject()) << "oldObject null on a CREATE";
  ASSERT_TRUE(r->hasObject());
  // The raw object parses again, escapes intact.
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  ASSERT_FALSE(parser.iterate(r->object).get(doc));
  std::string_view label, value;
  ASSERT_FALSE(doc.at_pointer("/metadata/labels/a~1b").get_string().get(label));
  EXPECT_EQ(label, "c~d");
  doc.rewind();
  ASSERT_FALSE(doc.at_pointer("/data/k").get_string().get(value));
  EXPECT_EQ(value, "v\xc3\xa9\n");
  EXPECT_NE(std::string_view(r->options.data(), r->options.size()).find("CreateOptions"), std::string_view::npos);
}

TEST(CopyRequest, CopiesEveryFieldAndTheRawJson) {
  auto r = decodeAdmissionReview(corpus("create_configmap.json"));
  ASSERT_TRUE(r) << r.error().describe();
  const AdmissionRequest copy = copyRequest(*r);
  EXPECT_EQ(copy.uid, r->uid);
  EXPECT_EQ(copy.kind, r->kind);
  EXPECT_EQ(copy.requestKind, r->requestKind);
  EXPECT_EQ(copy.name, r->name);
  EXPECT_EQ(copy.namespace_, r->namespace_);
  EXPECT_EQ(copy.userInfo.groups, r->userInfo.groups);
  EXPECT_EQ(std::string_view(copy.object.data(), copy.object.size()),
            std::string_view(r->object.data(), r->object.size()));
  EXPECT_NE(copy.object.data(), r->object.data());
  EXPECT_EQ(std::string_view(copy.options.data(), copy.options.size()),
            std::string_view(r->options.data(), r->options.size()));
  EXPECT_FALSE(copy.hasOldObject());
}

TEST(DecodeAdmissionReview, StatusUpdateDryRunWithConvertedKind) {
  auto r = decodeAdmissionReview(corpus("update_status.json"));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->operation, Operation::kUpdate);
  EXPECT_EQ(r->subResource, "status");
  EXPECT_EQ(r->requestSubResource, "status");
  EXPECT_EQ(r->kind.version, "v1alpha1");
  EXPECT_EQ(r->requestKind->version, "v1beta1");
  EXPECT_EQ(r->requestResource->resource, "gpudevices");
  EXPECT_TRUE(r->dryRun);
  EXPECT_TRUE(r->hasObject());
  EXPECT_TRUE(r->hasOldObject());
  EXPECT_TRUE(r->userInfo.groups.empty());
}

TEST(DecodeAdmissionReview, TheUsersExtraIsKeptAsItCameForASubjectAccessReview) {
  auto r = decodeAdmissionReview(
      review(R"({"uid":"u","kind":{"group":"","version":"v1","kind":"ConfigMap"},)"
             R"("resource":{"group":"","version":"v1","resource":"configmaps"},"operation":"UPDATE",)"
             R"("userInfo":{"username":"sam","extra":{"scopes.example.com":["a","b"]},"groups":["sre"]}})"));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->userInfo.extraJson, R"({"scopes.example.com":["a","b"]})");
  EXPECT_EQ(r->userInfo.groups, std::vector<std::string>{"sre"});
  auto none = decodeAdmissionReview(review(kMinimal));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->userInfo.extraJson.empty());
}

TEST(DecodeAdmissionReview, DeleteHasOnlyTheOldObject) {
  auto r = decodeAdmissionReview(corpus("delete.json"));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->operation, Operation::kDelete);
  EXPECT_FALSE(r->hasObject());
  EXPECT_TRUE(r->hasOldObject());
  EXPECT_FALSE(r->requestKind.has_value());
}

void expectRefused(const std::string& body, const std::string& expected) {
  auto r = decodeAdmissionReview(body);
  ASSERT_FALSE(r) << body;
  EXPECT_NE(r.error().message.find(expected), std::string::npos) << r.error().message << " for " << body;
}

TEST(DecodeAdmissionReview, ErrorsNameWhatIsWrong) {
  expectRefused("", "empty body");
  expectRefused("[1,2]", "the review is not an object");
  expectRefused("{\"apiVersion\":", "AdmissionReview");
  expectRefused(corpus("wrong_version.json"), "apiVersion is \"admission.k8s.io/v1beta1\", expected");
  expectRefused(R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{}})", "kind is \"Pod\"");
  expectRefused(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request is missing");
  expectRefused(review(R"({"kind":{"version":"v1","kind":"X"},"operation":"CREATE"})"), "request.uid is missing");
  expectRefused(review("[]"), "request is not an object");
  expectRefused(corpus("bad_operation.json"), "request.operation \"PATCH\"");
  expectRefused(review(R"({"uid":"u","operation":"CREATE"})"), "request.kind is missing");
  expectRefused(review(R"({"uid":"u","kind":{"version":"v1","kind":"X"},"operation":"CREATE"})"),
                "request.resource is missing");
  expectRefused(review(R"({"uid":7})"), "request.uid is not a string");
  expectRefused(review(R"({"uid":"u","dryRun":"yes"})"), "request.dryRun is not a boolean");
  expectRefused(review(R"({"uid":"u","object":"text"})"), "request.object is not an object");
  expectRefused(review(R"({"uid":"u","userInfo":{"groups":{}}})"), "request.userInfo.groups is not an array");
  expectRefused(review(kMinimal) + "{}", "content after the review");
}

TEST(DecodeAdmissionReview, BodyAboveTheLimitIsRefusedUnread) {
  DecodeOptions small;
  small.maxBodyBytes = 64;
  auto r = decodeAdmissionReview(review(kMinimal), small);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().httpStatus, 413);
  EXPECT_NE(r.error().message.find("above the limit of 64"), std::string::npos);
  EXPECT_TRUE(decodeAdmissionReview(review(kMinimal)));
}

TEST(JsonPatch, PointerEscapesTildeThenSlash) {
  EXPECT_EQ(JsonPatch::pointer({"metadata", "labels", "tally.dev/tenant"}), "/metadata/labels/tally.dev~1tenant");
  EXPECT_EQ(JsonPatch::escapeToken("a~/b"), "a~0~1b");
  EXPECT_EQ(JsonPatch::pointer({""}), "/");
}

TEST(JsonPatch, SerializesEveryOperation) {
  JsonPatch p;
  p.test("/metadata/resourceVersion", "\"7\"").add("/a", "{\"x\":1}").replace("/b", "2").remove("/c~1d");
  EXPECT_EQ(p.toJson(),
            R"([{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"add","path":"/a","value":{"x":1}},)"
            R"({"op":"replace","path":"/b","value":2},{"op":"remove","path":"/c~1d"}])");
  EXPECT_EQ(JsonPatch().toJson(), "[]");
}

TEST(EncodeAdmissionReview, RefusalCarriesCodeMessageAndReason) {
  const auto out = encodeAdmissionReview("u-1", AdmissionResponse::refuse(422, "count 9 above \"max\" 8", "Invalid"));
  EXPECT_EQ(out,
            R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u-1","allowed":false,)"
            R"("status":{"code":422,"message":"count 9 above \"max\" 8","reason":"Invalid"}}})");
  EXPECT_NE(encodeAdmissionReview("u", AdmissionResponse::refuse(0, "no")).find(R"("code":403)"), std::string::npos)
      << "a refusal without a code is a 403";
}

TEST(EncodeAdmissionReview, PatchIsBase64JsonPatchWithWarningsAndAnnotations) {
  JsonPatch patch;
  patch.add(JsonPatch::pointer({"metadata", "labels", "tally.dev/seen"}), "\"yes\"");
  AdmissionResponse r = AdmissionResponse::mutate(patch);
  r.warnings = {"deprecated field"};
  r.auditAnnotations = {{"tally.dev/decision", "labelled"}};
  const auto out = encodeAdmissionReview("u-2", r);
  EXPECT_NE(out.find(R"("allowed":true,"patchType":"JSONPatch","patch":")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("warnings":["deprecated field"])"), std::string::npos);
  EXPECT_NE(out.find(R"("auditAnnotations":{"tally.dev/decision":"labelled"})"), std::string::npos);
  const auto start = out.find(R"("patch":")") + 9;
  const auto decoded = base64Decode(out.substr(start, out.find('"', start) - start));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, patch.toJson());
  EXPECT_EQ(out.find("status"), std::string::npos);
}

TEST(EncodeAdmissionReview, RefusalNeverCarriesAPatch) {
  AdmissionResponse r = AdmissionResponse::refuse(403, "no");
  r.patch.add("/a", "1");
  EXPECT_EQ(encodeAdmissionReview("u", r).find("patch"), std::string::npos);
}

TEST(Base64, EncodesEveryPaddingLength) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
}

}  // namespace
}  // namespace tally::runtime::admission
