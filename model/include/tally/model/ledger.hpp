#pragma once
// The reservation ledger: GPUReservationRecord documents kept in Git and
// reviewed by people. Tally validates them and checks their history; it never
// writes them. Reading the YAML is the codec's (tally/codec/reservation_record.hpp).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tally/model/objects.hpp"
#include "tally/model/refusal.hpp"

namespace tally::model {

enum class ReservationState { Pending, Active, Releasing, Released, Canceled };
std::string_view toString(ReservationState s);
std::optional<ReservationState> parseReservationState(std::string_view text);

// Whether the record holds capacity in the invariant (pending, active or releasing).
bool holdsCapacity(ReservationState s);
// Whether the record is a transaction still in flight (pending or releasing).
bool inFlight(ReservationState s);
// The state machine: pending -> active -> releasing -> released; pending -> canceled.
bool transitionAllowed(ReservationState from, ReservationState to);

struct ReservationRecord {
  std::string id;
  std::string organization;
  std::string project;
  std::string profileId;
  std::int64_t devices = 0;
  ReservationState state = ReservationState::Pending;
  std::optional<Timestamp> requestedAt;
  std::optional<Timestamp> startsAt;
  std::optional<Timestamp> endsAt;
  std::string addonId;
  std::string billingReference;
  std::string approvedByProduct;
  std::string approvedBySre;
  std::optional<Timestamp> activatedAt;
  std::optional<Timestamp> releasedAt;
  std::string evidenceRevision;
  std::string reason;
  std::string source;  // file or ConfigMap key it came from
  friend bool operator==(const ReservationRecord&, const ReservationRecord&) = default;
};

// A record that could not be read or failed validation. It still names the
// pool when it could be read that far, so the audit can close the right gate.
struct InvalidRecord {
  std::string source;
  std::string id;
  std::string profileId;
  std::vector<Refusal> problems;
  friend bool operator==(const InvalidRecord&, const InvalidRecord&) = default;
};

// A problem of one revision of the ledger as a whole, or of its change from
// the revision before: the file and record it concerns and the rule broken.
enum class LedgerRule {
  DuplicateId,           // two records (files) carry the same metadata.id
  MultipleTransactions,  // more than one pending or releasing record in a pool
  Transition,            // a record changed other than the state machine allows
  Disappeared,           // a record of the previous revision is gone
};
std::string_view toString(LedgerRule rule);

struct LedgerProblem {
  std::string source;  // the record's file (in the previous revision when it disappeared)
  std::string id;
  LedgerRule rule;
  std::string message;
  std::string profileId;  // the record's pool; empty when it could not be read
  friend bool operator==(const LedgerProblem&, const LedgerProblem&) = default;
};

// Why the ledger's source could not be read whole (an unreadable directory or
// file, a ConfigMap that is gone). The ledger then keeps the last revision
// read whole, and the audit fails closed on the error.
struct LedgerReadError {
  std::string source;  // the directory, file or ConfigMap
  std::string message;
  friend bool operator==(const LedgerReadError&, const LedgerReadError&) = default;
};

struct Ledger {
  std::vector<ReservationRecord> records;
  std::vector<InvalidRecord> invalid;
  bool loaded = false;  // a ledger source was configured and read
  // The Transition and Disappeared problems of this revision against every
  // record seen before it in this process (advanceLedgerHistory).
  std::vector<LedgerProblem> history;
  std::optional<LedgerReadError> readError;  // the last read failed: these records are the revision before it
  friend bool operator==(const Ledger&, const Ledger&) = default;
};

// Validation of an already-built record; empty when valid.
std::vector<Refusal> validateRecord(const ReservationRecord& r);

// Checks a change of one record between two revisions of the ledger: the state
// machine, and the fields that are fixed once recorded.
std::optional<Refusal> checkRecordTransition(const ReservationRecord& before, const ReservationRecord& after);

// Checks a revision of the ledger: ids are unique and at most one transaction
// is in flight per profile pool. Given the revision before it, also that every
// record changed only as checkRecordTransition allows and that none vanished
// (records are released or canceled, never deleted). Invalid records count for
// ids and presence; their own problems are in Ledger::invalid, not repeated.
std::vector<LedgerProblem> checkLedgerHistory(const Ledger& current, const Ledger* previous = nullptr);

// What a ledger source remembers between revisions: the last accepted version
// of every record it has seen (by id), so that a record that vanished in one
// revision is still missing in the next, and a forbidden change stays one
// until the record is put back on the state machine.
struct LedgerMemory {
  std::map<std::string, ReservationRecord> records;
  std::map<std::string, InvalidRecord> invalidOnly;  // ids seen only as invalid records
  friend bool operator==(const LedgerMemory&, const LedgerMemory&) = default;
};

struct LedgerStep {
  Ledger ledger;  // the revision, its history filled
  LedgerMemory memory;
};

// Checks a new revision against the memory (checkLedgerHistory with the
// remembered records as the revision before): its Transition and Disappeared
// problems go to Ledger::history. The memory takes every record whose change
// was allowed; a record with a forbidden change keeps its last accepted
// version, a vanished record stays remembered.
LedgerStep advanceLedgerHistory(const LedgerMemory& memory, Ledger current);

// Detects content that must never be in a ledger record: device UUIDs, PCI
// addresses, secrets, payment data, raw HAMi annotations. Returns a description.
std::optional<std::string> findForbiddenContent(std::string_view text);

}  // namespace tally::model
