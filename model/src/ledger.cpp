#include "tally/model/ledger.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <regex>
#include <set>

namespace tally::model {

namespace {

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
    YAML::Node v = map ? map[std::string(key)] : YAML::Node();
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
    if (!t) problem(Code::RecordTime, where(fmt::format("{}.{} '{}' is not an RFC 3339 time", path, key, text)));
    return t;
  }

  std::vector<Refusal> problems;

 private:
  std::string id_;
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool luhn(std::string_view digitsOnly) {
  int sum = 0;
  bool dbl = false;
  for (auto it = digitsOnly.rbegin(); it != digitsOnly.rend(); ++it) {
    int d = *it - '0';
    if (dbl) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
    dbl = !dbl;
  }
  return sum % 10 == 0;
}

}  // namespace

std::string_view toString(ReservationState s) {
  switch (s) {
    case ReservationState::Pending: return "pending";
    case ReservationState::Active: return "active";
    case ReservationState::Releasing: return "releasing";
    case ReservationState::Released: return "released";
    case ReservationState::Canceled: return "canceled";
  }
  return "unknown";
}

std::optional<ReservationState> parseReservationState(std::string_view text) {
  if (text == "pending") return ReservationState::Pending;
  if (text == "active") return ReservationState::Active;
  if (text == "releasing") return ReservationState::Releasing;
  if (text == "released") return ReservationState::Released;
  if (text == "canceled") return ReservationState::Canceled;
  return std::nullopt;
}

bool holdsCapacity(ReservationState s) {
  // A release in progress keeps its capacity until it is released: a failed
  // release must never free or resell it.
  return s == ReservationState::Pending || s == ReservationState::Active || s == ReservationState::Releasing;
}

bool inFlight(ReservationState s) { return s == ReservationState::Pending || s == ReservationState::Releasing; }

bool transitionAllowed(ReservationState from, ReservationState to) {
  if (from == to) return true;
  switch (from) {
    case ReservationState::Pending: return to == ReservationState::Active || to == ReservationState::Canceled;
    case ReservationState::Active: return to == ReservationState::Releasing;
    case ReservationState::Releasing: return to == ReservationState::Released;
    case ReservationState::Released:
    case ReservationState::Canceled: return false;
  }
  return false;
}

std::optional<std::string> findForbiddenContent(std::string_view text) {
  const std::string lowered = lower(text);
  static const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  static const std::regex pci("(^|[^0-9a-f:])([0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]([^0-9a-f]|$)");
  static const std::regex secret(
      "-----begin|\\bpassword\\b|\\bpasswd\\b|\\bsecret\\b|\\btoken\\b|\\bapi[_-]?key\\b|\\bbearer\\s|"
      "\\bprivate[_-]?key\\b");
  static const std::regex payment("\\biban\\b|\\bcvv\\b|\\bcvc\\b|card[_ -]?number|credit[_ -]?card");
  static const std::regex hami("hami\\.io/|nvidia\\.com/use-gpu|nvidia\\.com/nouse-gpu");
  std::smatch m;
  if (std::regex_search(lowered, m, uuid)) return fmt::format("a device UUID ({})", m.str());
  if (std::regex_search(lowered, m, pci)) return fmt::format("a PCI address ({})", m.str(0));
  if (std::regex_search(lowered, m, hami)) return fmt::format("a raw HAMi annotation ({})", m.str());
  if (std::regex_search(lowered, m, secret)) return fmt::format("secret material ({})", m.str());
  if (std::regex_search(lowered, m, payment)) return fmt::format("payment data ({})", m.str());
  // Card numbers: 13-19 digits (spaces or dashes allowed) passing the Luhn check.
  std::string run;
  auto flush = [&]() -> std::optional<std::string> {
    if (run.size() >= 13 && run.size() <= 19 && luhn(run)) return std::string("a payment card number");
    run.clear();
    return std::nullopt;
  };
  for (char c : lowered) {
    if (c >= '0' && c <= '9') {
      run.push_back(c);
    } else if (c != ' ' && c != '-') {
      if (auto hit = flush()) return hit;
    }
  }
  if (auto hit = flush()) return hit;
  return std::nullopt;
}

std::vector<Refusal> validateRecord(const ReservationRecord& r) {
  std::vector<Refusal> out;
  auto bad = [&](Code code, std::string msg) { out.push_back({code, fmt::format("record {}: {}", r.id, msg)}); };
  static const std::regex idPattern("gpu-res-[a-z0-9]([a-z0-9-]*[a-z0-9])?");
  if (!std::regex_match(r.id, idPattern)) bad(Code::RecordSchema, "metadata.id must look like gpu-res-<ticket>");
  if (r.organization.empty()) bad(Code::RecordSchema, "spec.organization is required");
  if (r.profileId.empty()) bad(Code::RecordSchema, "spec.profileId is required");
  if (r.devices < 1) bad(Code::RecordSchema, fmt::format("spec.devices must be at least 1, got {}", r.devices));
  if (r.addonId.empty()) bad(Code::RecordSchema, "spec.addonId is required");
  if (r.billingReference.empty()) bad(Code::RecordSchema, "spec.billingReference is required");
  if (!r.requestedAt) bad(Code::RecordTime, "spec.requestedAt is required");
  if (!r.startsAt) bad(Code::RecordTime, "spec.startsAt is required");
  if (r.startsAt && r.endsAt && *r.endsAt <= *r.startsAt) bad(Code::RecordTime, "spec.endsAt must be after spec.startsAt");
  const bool wasActivated = r.state == ReservationState::Active || r.state == ReservationState::Releasing ||
                            r.state == ReservationState::Released;
  if (wasActivated) {
    if (r.approvedByProduct.empty() || r.approvedBySre.empty()) {
      bad(Code::RecordSchema, fmt::format("a {} record needs spec.approvedBy.product and spec.approvedBy.sre", toString(r.state)));
    } else if (r.approvedByProduct == r.approvedBySre) {
      bad(Code::RecordSchema, "spec.approvedBy.product and spec.approvedBy.sre must be two different people");
    }
    if (!r.activatedAt) bad(Code::RecordState, fmt::format("a {} record needs status.activatedAt (billing starts there)", toString(r.state)));
    if (r.evidenceRevision.empty()) bad(Code::RecordState, fmt::format("a {} record needs status.evidenceRevision", toString(r.state)));
  } else if (r.activatedAt) {
    bad(Code::RecordState, fmt::format("a {} record must not have status.activatedAt: it was never activated", toString(r.state)));
  }
  if (r.state == ReservationState::Released) {
    if (!r.releasedAt) bad(Code::RecordState, "a released record needs status.releasedAt (billing stops there)");
  } else if (r.releasedAt) {
    bad(Code::RecordState, fmt::format("a {} record must not have status.releasedAt", toString(r.state)));
  }
  if (r.activatedAt && r.requestedAt && *r.activatedAt < *r.requestedAt) {
    bad(Code::RecordTime, "status.activatedAt is before spec.requestedAt");
  }
  if (r.activatedAt && r.releasedAt && *r.releasedAt < *r.activatedAt) {
    bad(Code::RecordTime, "status.releasedAt is before status.activatedAt");
  }
  return out;
}

std::optional<Refusal> checkRecordTransition(const ReservationRecord& before, const ReservationRecord& after) {
  if (!transitionAllowed(before.state, after.state)) {
    return Refusal{Code::RecordTransition, fmt::format("record {}: state may not change from {} to {}", after.id,
                                                       toString(before.state), toString(after.state))};
  }
  if (before.organization != after.organization || before.profileId != after.profileId) {
    return Refusal{Code::RecordTransition,
                   fmt::format("record {}: organization and profileId are fixed once recorded", after.id)};
  }
  if (before.state != ReservationState::Pending && before.devices != after.devices) {
    return Refusal{Code::RecordTransition,
                   fmt::format("record {}: devices may change only while pending ({} -> {})", after.id, before.devices,
                               after.devices)};
  }
  return std::nullopt;
}

namespace {

ParsedRecord parseDocument(const YAML::Node& doc, std::string_view text, std::string_view source) {
  ParsedRecord out;
  out.invalid.source = std::string(source);
  Reader rd("");
  if (!doc.IsMap()) {
    rd.problem(Code::RecordSchema, fmt::format("{}: a record must be a YAML mapping", source));
    out.invalid.problems = rd.problems;
    return out;
  }
  ReservationRecord r;
  r.source = std::string(source);
  YAML::Node meta = doc["metadata"];
  if (meta && meta.IsMap() && meta["id"] && meta["id"].IsScalar()) {
    r.id = meta["id"].Scalar();
    rd.setId(r.id);
    out.invalid.id = r.id;
  }
  YAML::Node spec = doc["spec"];
  if (spec && spec.IsMap() && spec["profileId"] && spec["profileId"].IsScalar()) {
    out.invalid.profileId = spec["profileId"].Scalar();
  }
  if (auto forbidden = findForbiddenContent(text)) {
    rd.problem(Code::RecordForbiddenContent,
               rd.where(fmt::format("contains {}; keep physical identifiers and secrets in restricted evidence only",
                                    *forbidden)));
  }
  std::string apiVersion = rd.string(doc, "", "apiVersion", true);
  if (!apiVersion.empty() && apiVersion != kApiVersion) {
    rd.problem(Code::RecordSchema, rd.where(fmt::format("apiVersion must be {}, got {}", kApiVersion, apiVersion)));
  }
  std::string kind = rd.string(doc, "", "kind", true);
  if (!kind.empty() && kind != kKind) rd.problem(Code::RecordSchema, rd.where(fmt::format("kind must be {}, got {}", kKind, kind)));
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
      if (devices.size() > 6 || !std::all_of(devices.begin(), devices.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        rd.problem(Code::RecordSchema, rd.where(fmt::format("spec.devices '{}' is not a whole number of devices", devices)));
      } else {
        r.devices = std::stoll(devices);
      }
    }
    std::string state = rd.string(spec, "spec", "state", true);
    if (auto s = parseReservationState(state)) {
      r.state = *s;
    } else if (!state.empty()) {
      rd.problem(Code::RecordState,
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
    for (auto& p : validateRecord(r)) rd.problems.push_back(std::move(p));
  }
  if (!rd.problems.empty()) {
    out.invalid.problems = std::move(rd.problems);
    return out;
  }
  out.record = std::move(r);
  return out;
}

}  // namespace

ParsedRecord parseReservationRecord(std::string_view yaml, std::string_view source) {
  ParsedRecord out;
  out.invalid.source = std::string(source);
  if (yaml.size() > kMaxRecordBytes) {
    out.invalid.problems.push_back(
        {Code::RecordSchema, fmt::format("{}: {} bytes is larger than a record may be ({} bytes)", source, yaml.size(), kMaxRecordBytes)});
    return out;
  }
  try {
    YAML::Node doc = YAML::Load(std::string(yaml));
    return parseDocument(doc, yaml, source);
  } catch (const std::exception& e) {
    out.invalid.problems.push_back({Code::RecordSchema, fmt::format("{}: not valid YAML: {}", source, e.what())});
    return out;
  }
}

void addToLedger(Ledger& ledger, std::string_view yaml, std::string_view source) {
  ledger.loaded = true;
  if (yaml.size() > kMaxRecordBytes * 16) {
    ledger.invalid.push_back({std::string(source), "", "",
                              {{Code::RecordSchema, fmt::format("{}: file of {} bytes is too large", source, yaml.size())}}});
    return;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(yaml));
  } catch (const std::exception& e) {
    ledger.invalid.push_back(
        {std::string(source), "", "", {{Code::RecordSchema, fmt::format("{}: not valid YAML: {}", source, e.what())}}});
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
    ParsedRecord parsed = parseDocument(doc, emitter.c_str(), where);
    if (parsed.record) {
      ledger.records.push_back(std::move(*parsed.record));
    } else {
      ledger.invalid.push_back(std::move(parsed.invalid));
    }
  }
}

}  // namespace tally::model
