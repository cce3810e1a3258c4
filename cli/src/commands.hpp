#pragma once
// tallyctl's commands. Each returns the process exit code:
// 0 done, 1 the input is valid but fails its check, 2 the input is unusable.

#include <string>

#include "inputs.hpp"

namespace tally::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

struct ReportOptions {
  InputOptions input;
  std::string output = "json";  // json | table
};
int runReport(const ReportOptions& options);

// ledger validate: every record of a directory, the revision as a whole, and,
// given the previous revision, every record's change since.
struct LedgerValidateOptions {
  std::string directory;
  std::string previousDirectory;  // empty: no history check
};
int runLedgerValidate(const LedgerValidateOptions& options);

// plan: one proposed change, evaluated against the invariant of every pool it touches.
struct PlanOptions {
  InputOptions input;
  std::string recordFile;       // a new or changed GPUReservationRecord
  std::string addon;            // <organization>/<add-on>=<quantity>
  std::string nodeMode;         // <node>=<mode>
  std::string output = "text";  // text | json
};
int runPlan(const PlanOptions& options);

// options: the catalogue of one namespace (model::catalogOptions).
struct OptionsOptions {
  InputOptions input;
  std::string ns;
  std::string output = "table";  // table | json
};
int runOptions(const OptionsOptions& options);

// audit: every pool's findings and what clears each; exits 1 when a pool fails.
struct AuditCommandOptions {
  InputOptions input;
  std::string output = "text";  // text | json
};
int runAudit(const AuditCommandOptions& options);

// usage: the usage records and billing windows of [since, until) as JSON lines.
struct UsageOptions {
  InputOptions input;  // --snapshot (offline) and --ledger
  std::string since, until;
  std::string kubeconfig, context;
  std::string ns = "tally-system";  // of the tally-usage-* ConfigMaps
};
int runUsage(const UsageOptions& options);

}  // namespace tally::cli
