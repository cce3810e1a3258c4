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

void Metadata::fillSink() const {
  if (sink == nullptr) return;
  sink->ns = ns;
  sink->name = name;
  sink->uid = uid;
  sink->resourceVersion = resourceVersion;
  sink->generation = generation;
  sink->created = created;
  sink->deleting = deleting;
  sink->finalizers = finalizers;
}

DecodeError metaError(const MetaError& error) { return fieldError(error.field, error.message); }

std::vector<model::OwnerReference> modelOwners(std::vector<OwnerRef>&& owners) {
  std::vector<model::OwnerReference> out;
  out.reserve(owners.size());
  for (auto& owner : owners) {
    out.push_back({std::move(owner.kind), std::move(owner.name), std::move(owner.uid), owner.controller,
                   std::move(owner.apiVersion)});
  }
  return out;
}

namespace {

using StringHook = std::function<Status(std::string_view, std::string_view)>;

// A hook's error under metadata.<map>[key].
Status runHook(const StringHook& hook, const StringPairs& pairs, std::string_view map) {
  for (const auto& [key, value] : pairs) {
    Status status = hook(key, value);
    if (!status) return std::move(status).error().under("[" + key + "]").under(map);
  }
  return {};
}

}  // namespace

Status readMetadata(od::value value, Metadata& meta, const MetadataHooks& hooks) {
  MetaStatus read = decodeObjectMetaJson(value, meta, hooks.parts());
  meta.fillSink();
  if (!read) return metaError(read.error());
  if (hooks.label) {
    if (auto status = runHook(hooks.label, meta.labels, "metadata.labels"); !status) return status;
  }
  if (hooks.annotation) {
    if (auto status = runHook(hooks.annotation, meta.annotations, "metadata.annotations"); !status) return status;
  }
  return {};
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
