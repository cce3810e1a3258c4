#include "tally/runtime/json_patch.hpp"

#include <algorithm>

#include "tally/common/json.hpp"

namespace tally::runtime {

JsonPatch& JsonPatch::add(std::string path, std::string valueJson) {
  ops_.push_back({Op::kAdd, std::move(path), std::move(valueJson)});
  return *this;
}
JsonPatch& JsonPatch::replace(std::string path, std::string valueJson) {
  ops_.push_back({Op::kReplace, std::move(path), std::move(valueJson)});
  return *this;
}
JsonPatch& JsonPatch::remove(std::string path) {
  ops_.push_back({Op::kRemove, std::move(path), {}});
  return *this;
}
JsonPatch& JsonPatch::test(std::string path, std::string valueJson) {
  ops_.push_back({Op::kTest, std::move(path), std::move(valueJson)});
  return *this;
}

JsonPatch& JsonPatch::addString(std::string path, std::string_view value) {
  return add(std::move(path), jsonString(value));
}
JsonPatch& JsonPatch::replaceString(std::string path, std::string_view value) {
  return replace(std::move(path), jsonString(value));
}
JsonPatch& JsonPatch::testString(std::string path, std::string_view value) {
  return test(std::move(path), jsonString(value));
}

JsonPatch& JsonPatch::addFinalizer(const std::vector<std::string>& current, std::string_view finalizer) {
  if (std::find(current.begin(), current.end(), finalizer) != current.end()) return *this;
  if (current.empty()) return add("/metadata/finalizers", "[" + jsonString(finalizer) + "]");
  return addString("/metadata/finalizers/-", finalizer);
}

JsonPatch& JsonPatch::removeFinalizer(const std::vector<std::string>& current, std::string_view finalizer) {
  const auto at = std::find(current.begin(), current.end(), finalizer);
  if (at == current.end()) return *this;
  const std::string path = "/metadata/finalizers/" + std::to_string(at - current.begin());
  return testString(path, finalizer).remove(path);
}

std::string JsonPatch::escapeToken(std::string_view token) { return jsonPointerToken(token); }

std::string JsonPatch::pointer(std::initializer_list<std::string_view> tokens) {
  std::string out;
  for (auto t : tokens) out.append("/").append(escapeToken(t));
  return out;
}

namespace {

void appendOperation(std::string& out, const JsonPatch::Operation& op) {
  static constexpr std::string_view kNames[] = {"add", "replace", "remove", "test"};
  if (out.size() > 1) out += ',';
  out.append(R"({"op":")").append(kNames[static_cast<int>(op.op)]).append(R"(","path":)");
  appendJsonString(out, op.path);
  if (op.op != JsonPatch::Op::kRemove) out.append(R"(,"value":)").append(op.valueJson.empty() ? "null" : op.valueJson);
  out += '}';
}

}  // namespace

std::string JsonPatch::toJson() const { return body(); }

std::string JsonPatch::body(std::string_view pinnedResourceVersion) const {
  std::string out = "[";
  if (!pinnedResourceVersion.empty()) {
    appendOperation(out, {Op::kReplace, "/metadata/resourceVersion", jsonString(pinnedResourceVersion)});
  }
  for (const auto& op : ops_) appendOperation(out, op);
  out += ']';
  return out;
}

}  // namespace tally::runtime
