#include "tally/model/ledger.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <regex>
#include <set>

namespace tally::model {

namespace {

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
  if (r.startsAt && r.endsAt && *r.endsAt <= *r.startsAt)
    bad(Code::RecordTime, "spec.endsAt must be after spec.startsAt");
  const bool wasActivated = r.state == ReservationState::Active || r.state == ReservationState::Releasing ||
                            r.state == ReservationState::Released;
  if (wasActivated) {
    if (r.approvedByProduct.empty() || r.approvedBySre.empty()) {
      bad(Code::RecordSchema,
          fmt::format("a {} record needs spec.approvedBy.product and spec.approvedBy.sre", toString(r.state)));
    } else if (r.approvedByProduct == r.approvedBySre) {
      bad(Code::RecordSchema, "spec.approvedBy.product and spec.approvedBy.sre must be two different people");
    }
    if (!r.activatedAt)
      bad(Code::RecordState,
          fmt::format("a {} record needs status.activatedAt (billing starts there)", toString(r.state)));
    if (r.evidenceRevision.empty())
      bad(Code::RecordState, fmt::format("a {} record needs status.evidenceRevision", toString(r.state)));
  } else if (r.activatedAt) {
    bad(Code::RecordState,
        fmt::format("a {} record must not have status.activatedAt: it was never activated", toString(r.state)));
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
    return Refusal{Code::RecordTransition, fmt::format("record {}: devices may change only while pending ({} -> {})",
                                                       after.id, before.devices, after.devices)};
  }
  return std::nullopt;
}

std::string_view toString(LedgerRule rule) {
  switch (rule) {
    case LedgerRule::DuplicateId: return "DuplicateId";
    case LedgerRule::MultipleTransactions: return "MultipleTransactions";
    case LedgerRule::Transition: return "Transition";
    case LedgerRule::Disappeared: return "Disappeared";
  }
  return "Unknown";
}

namespace {

// Where each id occurs in one revision, valid and invalid records alike, in
// the ledger's (path) order.
std::map<std::string, std::vector<std::string>> sourcesById(const Ledger& ledger) {
  std::map<std::string, std::vector<std::string>> sources;
  for (const auto& r : ledger.records) sources[r.id].push_back(r.source);
  for (const auto& inv : ledger.invalid) {
    if (!inv.id.empty()) sources[inv.id].push_back(inv.source);
  }
  for (auto& [id, files] : sources) std::sort(files.begin(), files.end());
  return sources;
}

// The pool the id's first record (valid, else invalid) names.
std::string poolOf(const Ledger& ledger, const std::string& id) {
  for (const auto& r : ledger.records) {
    if (r.id == id) return r.profileId;
  }
  for (const auto& inv : ledger.invalid) {
    if (inv.id == id) return inv.profileId;
  }
  return {};
}

void duplicateIds(const Ledger& ledger, std::vector<LedgerProblem>& out) {
  for (const auto& [id, files] : sourcesById(ledger)) {
    for (std::size_t i = 1; i < files.size(); ++i) {
      out.push_back({files[i], id, LedgerRule::DuplicateId,
                     fmt::format("id {} is already recorded in {}; each reservation has one record", id, files[0]),
                     poolOf(ledger, id)});
    }
  }
}

void multipleTransactions(const Ledger& ledger, std::vector<LedgerProblem>& out) {
  std::map<std::string, std::vector<const ReservationRecord*>> inFlightByPool;
  for (const auto& r : ledger.records) {
    if (inFlight(r.state)) inFlightByPool[r.profileId].push_back(&r);
  }
  for (const auto& [pool, records] : inFlightByPool) {
    for (std::size_t i = 1; i < records.size(); ++i) {
      const ReservationRecord& first = *records[0];
      out.push_back({records[i]->source, records[i]->id, LedgerRule::MultipleTransactions,
                     fmt::format("{} record in pool {} while {} ({}, {}) is still in flight; at most one "
                                 "transaction per pool",
                                 toString(records[i]->state), pool, first.id, toString(first.state), first.source),
                     pool});
    }
  }
}

void transitions(const Ledger& current, const Ledger& previous, std::vector<LedgerProblem>& out) {
  std::map<std::string, const ReservationRecord*> before;
  for (const auto& r : previous.records) before.try_emplace(r.id, &r);
  for (const auto& r : current.records) {
    auto it = before.find(r.id);
    if (it == before.end()) continue;
    if (auto refusal = checkRecordTransition(*it->second, r)) {
      out.push_back({r.source, r.id, LedgerRule::Transition, std::move(refusal->message), r.profileId});
    }
  }
}

void disappeared(const Ledger& current, const Ledger& previous, std::vector<LedgerProblem>& out) {
  const auto present = sourcesById(current);
  std::set<std::string> reported;  // an id recorded twice before vanishes once
  for (const auto& r : previous.records) {
    if (present.contains(r.id) || !reported.insert(r.id).second) continue;
    out.push_back({r.source, r.id, LedgerRule::Disappeared,
                   fmt::format("the {} record of pool {} is gone; a record is released or canceled, never deleted",
                               toString(r.state), r.profileId),
                   r.profileId});
  }
  for (const auto& inv : previous.invalid) {
    if (inv.id.empty() || present.contains(inv.id) || !reported.insert(inv.id).second) continue;
    out.push_back({inv.source, inv.id, LedgerRule::Disappeared,
                   "the record is gone; a record is released or canceled, never deleted", inv.profileId});
  }
}

}  // namespace

std::vector<LedgerProblem> checkLedgerHistory(const Ledger& current, const Ledger* previous) {
  std::vector<LedgerProblem> out;
  duplicateIds(current, out);
  multipleTransactions(current, out);
  if (previous) {
    transitions(current, *previous, out);
    disappeared(current, *previous, out);
  }
  return out;
}

LedgerStep advanceLedgerHistory(const LedgerMemory& memory, Ledger current) {
  Ledger previous;
  for (const auto& [id, r] : memory.records) previous.records.push_back(r);
  for (const auto& [id, inv] : memory.invalidOnly) previous.invalid.push_back(inv);
  std::set<std::string> refused;  // ids whose change the state machine does not allow
  current.history.clear();
  for (auto& p : checkLedgerHistory(current, &previous)) {
    if (p.rule != LedgerRule::Transition && p.rule != LedgerRule::Disappeared) continue;
    if (p.rule == LedgerRule::Transition) refused.insert(p.id);
    current.history.push_back(std::move(p));
  }
  LedgerStep step{std::move(current), memory};
  for (const auto& r : step.ledger.records) {
    if (refused.contains(r.id)) continue;
    step.memory.records.insert_or_assign(r.id, r);
    step.memory.invalidOnly.erase(r.id);
  }
  for (const auto& inv : step.ledger.invalid) {
    if (!inv.id.empty() && !step.memory.records.contains(inv.id)) step.memory.invalidOnly.insert_or_assign(inv.id, inv);
  }
  return step;
}

}  // namespace tally::model
