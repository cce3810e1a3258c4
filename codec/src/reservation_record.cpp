#include "tally/codec/reservation_record.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <exception>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "tally/common/rfc3339.hpp"
#include "yaml_guard.hpp"

namespace tally::codec {

namespace {

using model::Code;
using model::Refusal;
using model::Timestamp;

constexpr std::string_view kApiVersion = "operations.kube-dc.com/v1alpha1";
constexpr std::string_view kKind = "GPUReservationRecord";
constexpr std::size_t kMaxRecordBytes = 64 * 1024;

// Collects schema problems while reading one document.
class Reader {
 public:
  explicit Reader(std::string_view id) : id_(id) {}

  void problem(Code code, std::string message) { problems.push_back({code, std::move(message)}); }

  std::string where(std::string_view field) const {
    return fmt::format("record {}: {}", id_.empty() ? "<no id>" : id_, field);
  }
  void setId(std::string id) { id_ = std::move(id); }

  // A mapping's keys must all be known: a typo must not silently drop a field.
  void onlyKeys(const YAML::Node& map, std::string_view path, std::initializer_list<std::string_view> known) {
    if (!map || !map.IsMap()) return;
    for (const auto& kv : map) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "<non-scalar key>";
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        problem(Code::RecordSchema, where(fmt::format("unknown field {}.{}", path, key)));
      }
    }
  }

  std::string string(const YAML::Node& map, std::string_view path, std::string_view key, bool required) {
    // A scalar or sequence where a mapping belongs has no fields (yaml-cpp throws on its subscript).
    YAML::Node v = map && map.IsMap() ? map[std::string(key)] : YAML::Node();
    if (!v || v.IsNull()) {
      if (required) problem(Code::RecordSchema, where(fmt::format("{}.{} is required", path, key)));
      return {};
    }
    if (!v.IsScalar()) {
      problem(Code::RecordSchema, where(fmt::format("{}.{} must be a string", path, key)));
      return {};
    }
    if (required && v.Scalar().empty()) problem(Code::RecordSchema, where(fmt::format("{}.{} is empty", path, key)));
    return v.Scalar();
  }

  std::optional<Timestamp> time(const YAML::Node& map, std::string_view path, std::string_view key, bool required) {
    std::string text = string(map, path, key, required);
    if (text.empty()) return std::nullopt;
    auto t = parseRfc3339(text);
    if (!t) {
      problem(Code::RecordTime, where(fmt::format("{}.{} '{}' is not an RFC 3339 time", path, key, text)));
      return std::nullopt;
    }
    return t->seconds;
  }

  std::vector<Refusal> problems;

 private:
  std::string id_;
};

// A record refused for one problem found before its id could be read.
model::InvalidRecord refused(std::string_view source, std::string message) {
  return {std::string(source), "", "", {{Code::RecordSchema, std::move(message)}}};
}

RecordResult readDocument(const YAML::Node& doc, std::string_view text, std::string_view source) {
  if (!doc.IsMap()) return refused(source, fmt::format("{}: a record must be a YAML mapping", source));
  model::InvalidRecord invalid;
  invalid.source = std::string(source);
  Reader rd("");
  model::ReservationRecord r;
  r.source = std::string(source);
  YAML::Node meta = doc["metadata"];
  if (meta && meta.IsMap() && meta["id"] && meta["id"].IsScalar()) {
    r.id = meta["id"].Scalar();
    rd.setId(r.id);
    invalid.id = r.id;
  }
  YAML::Node spec = doc["spec"];
  if (spec && spec.IsMap() && spec["profileId"] && spec["profileId"].IsScalar()) {
    invalid.profileId = spec["profileId"].Scalar();
  }
  if (auto forbidden = model::findForbiddenContent(text)) {
    rd.problem(Code::RecordForbiddenContent,
               rd.where(fmt::format("contains {}; keep physical identifiers and secrets in restricted evidence only",
                                    *forbidden)));
  }
  std::string apiVersion = rd.string(doc, "", "apiVersion", true);
  if (!apiVersion.empty() && apiVersion != kApiVersion) {
    rd.problem(Code::RecordSchema, rd.where(fmt::format("apiVersion must be {}, got {}", kApiVersion, apiVersion)));
  }
  std::string kind = rd.string(doc, "", "kind", true);
  if (!kind.empty() && kind != kKind)
    rd.problem(Code::RecordSchema, rd.where(fmt::format("kind must be {}, got {}", kKind, kind)));
  rd.onlyKeys(doc, "", {"apiVersion", "kind", "metadata", "spec", "status"});
  if (!meta || !meta.IsMap()) rd.problem(Code::RecordSchema, rd.where("metadata must be a mapping with id"));
  rd.string(meta, "metadata", "id", true);
  rd.onlyKeys(meta, "metadata", {"id"});
  if (!spec || !spec.IsMap()) {
    rd.problem(Code::RecordSchema, rd.where("spec must be a mapping"));
  } else {
    rd.onlyKeys(spec, "spec",
                {"organization", "project", "profileId", "devices", "state", "requestedAt", "startsAt", "endsAt",
                 "addonId", "billingReference", "approvedBy"});
    r.organization = rd.string(spec, "spec", "organization", true);
    r.project = rd.string(spec, "spec", "project", false);
    r.profileId = rd.string(spec, "spec", "profileId", true);
    std::string devices = rd.string(spec, "spec", "devices", true);
    if (!devices.empty()) {
      if (devices.size() > 6 ||
          !std::all_of(devices.begin(), devices.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        rd.problem(Code::RecordSchema,
                   rd.where(fmt::format("spec.devices '{}' is not a whole number of devices", devices)));
      } else {
        r.devices = std::stoll(devices);
      }
    }
    std::string state = rd.string(spec, "spec", "state", true);
    if (auto s = model::parseReservationState(state)) {
      r.state = *s;
    } else if (!state.empty()) {
      rd.problem(
          Code::RecordState,
          rd.where(fmt::format("spec.state '{}' is not one of pending, active, releasing, released, canceled", state)));
    }
    r.requestedAt = rd.time(spec, "spec", "requestedAt", true);
    r.startsAt = rd.time(spec, "spec", "startsAt", true);
    r.endsAt = rd.time(spec, "spec", "endsAt", false);
    r.addonId = rd.string(spec, "spec", "addonId", true);
    r.billingReference = rd.string(spec, "spec", "billingReference", true);
    YAML::Node approved = spec["approvedBy"];
    if (approved && !approved.IsNull()) {
      if (!approved.IsMap()) {
        rd.problem(Code::RecordSchema, rd.where("spec.approvedBy must be a mapping with product and sre"));
      } else {
        rd.onlyKeys(approved, "spec.approvedBy", {"product", "sre"});
        r.approvedByProduct = rd.string(approved, "spec.approvedBy", "product", false);
        r.approvedBySre = rd.string(approved, "spec.approvedBy", "sre", false);
      }
    }
  }
  YAML::Node status = doc["status"];
  if (status && !status.IsNull()) {
    if (!status.IsMap()) {
      rd.problem(Code::RecordSchema, rd.where("status must be a mapping"));
    } else {
      rd.onlyKeys(status, "status", {"activatedAt", "releasedAt", "evidenceRevision", "reason"});
      r.activatedAt = rd.time(status, "status", "activatedAt", false);
      r.releasedAt = rd.time(status, "status", "releasedAt", false);
      r.evidenceRevision = rd.string(status, "status", "evidenceRevision", false);
      r.reason = rd.string(status, "status", "reason", false);
    }
  }
  if (rd.problems.empty()) {
    for (auto& p : model::validateRecord(r)) rd.problems.push_back(std::move(p));
  }
  if (!rd.problems.empty()) {
    invalid.problems = std::move(rd.problems);
    return invalid;
  }
  return r;
}

}  // namespace

RecordResult decodeReservationRecord(std::string_view yaml, std::string_view source) {
  if (yaml.size() > kMaxRecordBytes) {
    return refused(source, fmt::format("{}: {} bytes is larger than a record may be ({} bytes)", source, yaml.size(),
                                       kMaxRecordBytes));
  }
  if (auto why = yamlExpansionRefusal(yaml)) return refused(source, fmt::format("{}: {}", source, *why));
  try {
    YAML::Node doc = YAML::Load(std::string(yaml));
    return readDocument(doc, yaml, source);
  } catch (const std::exception& e) {
    return refused(source, fmt::format("{}: not valid YAML: {}", source, e.what()));
  }
}

void addLedgerFile(model::Ledger& ledger, std::string_view yaml, std::string_view source) {
  ledger.loaded = true;
  if (yaml.size() > kMaxRecordBytes * 16) {
    ledger.invalid.push_back(refused(source, fmt::format("{}: file of {} bytes is too large", source, yaml.size())));
    return;
  }
  if (auto why = yamlExpansionRefusal(yaml)) {
    ledger.invalid.push_back(refused(source, fmt::format("{}: {}", source, *why)));
    return;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml));
  } catch (const std::exception& e) {
    ledger.invalid.push_back(refused(source, fmt::format("{}: not valid YAML: {}", source, e.what())));
    return;
  }
  int index = 0;
  for (const auto& doc : docs) {
    if (!doc || doc.IsNull()) continue;
    std::string where = docs.size() > 1 ? fmt::format("{}#{}", source, index) : std::string(source);
    ++index;
    // Each document is checked on its own text so forbidden content is attributed.
    YAML::Emitter emitter;
    emitter << doc;
    RecordResult parsed = refused(where, fmt::format("{}: not a record", where));
    try {
      parsed = readDocument(doc, emitter.c_str(), where);
    } catch (const std::exception& e) {  // never thrown past here: the file is an invalid record
      parsed = refused(where, fmt::format("{}: not a record: {}", where, e.what()));
    }
    if (parsed) {
      ledger.records.push_back(std::move(parsed).value());
    } else {
      ledger.invalid.push_back(std::move(parsed).error());
    }
  }
}

}  // namespace tally::codec
