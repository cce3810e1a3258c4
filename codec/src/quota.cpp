#include <string>

#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

// spec.hard or status.{hard,used}: only the GPU keys are kept.
Status readQuotaSection(od::value value, std::string_view section,
                        std::initializer_list<std::pair<std::string_view, model::ResourceList*>> lists) {
  return forEachField(value, section, [&](std::string_view key, od::value field) -> Status {
    for (const auto& [name, list] : lists) {
      if (key == name) return readResources(field, key, model::isGpuQuotaKey, *list);
    }
    return {};
  });
}

}  // namespace

Result<model::HierarchicalResourceQuota> decodeHierarchicalResourceQuota(od::value json, ObjectMeta* out) {
  model::HierarchicalResourceQuota hrq;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key == "spec") return readQuotaSection(field, key, {{"hard", &hrq.hard}});
    if (key == "status") return readQuotaSection(field, key, {{"hard", &hrq.statusHard}, {"used", &hrq.statusUsed}});
    return {};
  });
  if (auto done = finished(std::move(status), "HierarchicalResourceQuota", meta); !done) return std::move(done).error();
  hrq.ns = std::move(meta.ns);
  hrq.name = std::move(meta.name);
  return hrq;
}

Result<model::ResourceQuota> decodeResourceQuota(od::value json, ObjectMeta* out) {
  model::ResourceQuota quota;
  Metadata meta;
  meta.sink = out;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta);
    if (key == "spec") return readQuotaSection(field, key, {{"hard", &quota.hard}});
    if (key == "status") return readQuotaSection(field, key, {{"used", &quota.used}});
    return {};
  });
  if (auto done = finished(std::move(status), "ResourceQuota", meta); !done) return std::move(done).error();
  quota.ns = std::move(meta.ns);
  quota.name = std::move(meta.name);
  return quota;
}

}  // namespace tally::codec
