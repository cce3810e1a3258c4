#include <string>

#include "kind_rules.hpp"
#include "metadata.hpp"
#include "tally/codec/objects.hpp"

namespace tally::codec {
namespace {

using namespace detail;

// Kubernetes defaults a container's request to its limit when only the limit
// is set, per resource; extended resources (all GPUs) must set both equal.
Status readContainerResources(od::value value, model::ResourceList& requests) {
  model::ResourceList limits;
  Status status = forEachField(value, "resources", [&](std::string_view key, od::value field) -> Status {
    if (key == "requests") return readResources(field, key, model::isExtendedResourceName, requests);
    if (key == "limits") return readResources(field, key, model::isExtendedResourceName, limits);
    return {};
  });
  if (!status) return status;
  defaultRequestsToLimits(requests, limits);
  return {};
}

Status readContainer(od::value value, model::ResourceList& requests, std::string* restartPolicy) {
  return forEachField(value, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "resources") return readContainerResources(field, requests);
    if (key == "restartPolicy" && restartPolicy != nullptr) return readString(field, key, *restartPolicy);
    return {};
  });
}

Status readSpec(od::value value, model::Pod& pod) {
  return forEachField(value, "spec", [&](std::string_view key, od::value field) -> Status {
    if (key == "nodeName") return readString(field, key, pod.nodeName);
    if (key == "schedulerName") return readString(field, key, pod.schedulerName);
    if (key == "overhead") return readResources(field, key, model::isExtendedResourceName, pod.overhead);
    if (key == "containers") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        Status read = readContainer(element, pod.containers.emplace_back(), nullptr);
        if (!read) return std::move(read).error().under(indexField(index));
        return {};
      });
    }
    if (key == "initContainers") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        model::InitContainer& init = pod.initContainers.emplace_back();
        std::string restartPolicy;
        Status read = readContainer(element, init.requests, &restartPolicy);
        if (!read) return std::move(read).error().under(indexField(index));
        init.restartable = restartPolicy == "Always";
        return {};
      });
    }
    if (key == "resourceClaims") {
      return forEachElement(field, key, [&](std::size_t index, od::value element) -> Status {
        pod.hasResourceClaims = true;
        model::PodClaim& claim = pod.claims.emplace_back();
        Status read = forEachField(element, "", [&](std::string_view claimKey, od::value claimField) -> Status {
          if (claimKey == "name") return readString(claimField, claimKey, claim.name);
          if (claimKey == "resourceClaimName") return readString(claimField, claimKey, claim.claimName);
          if (claimKey == "resourceClaimTemplateName") return readString(claimField, claimKey, claim.templateName);
          return {};
        });
        if (!read) return std::move(read).error().under(indexField(index));
        return {};
      });
    }
    return {};
  });
}

// status.resourceClaimStatuses[]: {name, resourceClaimName}.
Status readClaimStatuses(od::value value, std::string_view key,
                         std::vector<std::pair<std::string, std::string>>& generated) {
  return forEachElement(value, key, [&](std::size_t index, od::value element) -> Status {
    auto& entry = generated.emplace_back();
    Status read = forEachField(element, "", [&](std::string_view field, od::value v) -> Status {
      if (field == "name") return readString(v, field, entry.first);
      if (field == "resourceClaimName") return readString(v, field, entry.second);
      return {};
    });
    if (!read) return std::move(read).error().under(indexField(index));
    return {};
  });
}

}  // namespace

Result<model::Pod> decodePod(od::value json, ObjectMeta* out) { return decodePodWith(json, {}, out); }

Result<model::Pod> decodePodWith(od::value json, const PodDecodeOptions& options, ObjectMeta* out) {
  model::Pod pod;
  std::vector<std::pair<std::string, std::string>> generated;  // status: entry name -> claim made for it
  Metadata meta;
  meta.sink = out;
  MetadataHooks hooks;
  hooks.owners = true;
  Status status = forEachField(json, "", [&](std::string_view key, od::value field) -> Status {
    if (key == "metadata") return readMetadata(field, meta, hooks);
    if (key == "spec") return readSpec(field, pod);
    if (key == "status") {
      return forEachField(field, key, [&](std::string_view statusKey, od::value statusField) -> Status {
        if (statusKey == "resourceClaimStatuses") return readClaimStatuses(statusField, statusKey, generated);
        if (statusKey != "phase") return {};
        std::string phase;
        if (auto read = readString(statusField, statusKey, phase); !read) return read;
        pod.phase = model::parsePodPhase(phase);
        return {};
      });
    }
    return {};
  });
  const bool unnamedAllowed = options.allowGenerateName && status && meta.name.empty();
  if (!unnamedAllowed) {
    if (auto done = finished(std::move(status), "Pod", meta); !done) return std::move(done).error();
  }
  resolveTemplateClaims(pod, generated);
  pod.owners = modelOwners(std::move(meta.ownerReferences));
  pod.ns = std::move(meta.ns);
  pod.name = std::move(meta.name);
  pod.uid = std::move(meta.uid);
  return pod;
}

}  // namespace tally::codec
