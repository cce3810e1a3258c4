#include "metadata.hpp"

namespace tally::codec::detail {

std::string Metadata::describe(std::string_view kind) const {
  std::string text(kind);
  if (name.empty()) return text;
  text += ' ';
  if (!ns.empty()) text.append(ns).append("/");
  text += name;
  return text;
}

namespace {

using StringHook = std::function<Status(std::string_view, std::string_view)>;

Status readStringMap(od::value value, std::string_view field, const StringHook& hook) {
  return forEachField(value, field, [&](std::string_view key, od::value entry) -> Status {
    auto entryField = [&] { return "[" + std::string(key) + "]"; };
    std::string_view text;
    if (auto code = entry.get_string().get(text)) return jsonError(code, entryField(), "a string");
    Status status = hook(key, text);
    if (!status) return std::move(status).error().under(entryField());
    return {};
  });
}

}  // namespace

Status readMetadata(od::value value, Metadata& meta, const MetadataHooks& hooks) {
  Status status = forEachField(value, "metadata", [&](std::string_view key, od::value field) -> Status {
    if (key == "name") return readString(field, key, meta.name);
    if (key == "namespace") return readString(field, key, meta.ns);
    if (key == "uid") return readString(field, key, meta.uid);
    if (key == "resourceVersion") return readString(field, key, meta.resourceVersion);
    if (key == "creationTimestamp") return readString(field, key, meta.creationTimestamp);
    if (key == "deletionTimestamp") return readPresence(field, key, meta.deleting);
    // Maps nobody reads are skipped unread (on-demand skips them for free).
    if (key == "labels" && hooks.label) return readStringMap(field, key, hooks.label);
    if (key == "annotations" && hooks.annotation) return readStringMap(field, key, hooks.annotation);
    if (key == "ownerReferences" && hooks.ownerReferences) return hooks.ownerReferences(field);
    return {};
  });
  if (meta.sink != nullptr) *meta.sink = ObjectMeta{meta.ns, meta.name, meta.uid, meta.resourceVersion, meta.deleting};
  return status;
}

DecodeError inObject(DecodeError error, std::string_view kind, const Metadata& meta) {
  return std::move(error).within(meta.describe(kind));
}

Status finished(Status status, std::string_view kind, const Metadata& meta) {
  if (!status) return inObject(std::move(status).error(), kind, meta);
  if (meta.name.empty()) return inObject(fieldError("metadata.name", "missing"), kind, meta);
  return {};
}

}  // namespace tally::codec::detail
