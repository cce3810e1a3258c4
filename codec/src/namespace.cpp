#include <charconv>
#include <string>

#include "kind_rules.hpp"
#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

}  // namespace

Result<model::Namespace> decodeNamespace(od::value json, ObjectMeta* out) {
  model::Namespace ns;
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.label = [&](std::string_view key, std::string_view value) { return applyNamespaceLabel(ns, key, value); };
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    return {};
  });
  if (auto done = finished(std::move(status), "Namespace", meta); !done) return std::move(done).error();
  ns.name = std::move(meta.name);
  ns.deleting = meta.deleting;
  return ns;
}

}  // namespace tally::codec
