#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "plan_output.hpp"
#include "tally/codec/reservation_record.hpp"
#include "tally/model/pool.hpp"

namespace tally::cli {
namespace {

// "org/addon=quantity"
std::optional<model::AddonQuantityChange> parseAddonChange(const std::string& text) {
  const auto slash = text.find('/');
  const auto equals = text.find('=', slash == std::string::npos ? 0 : slash);
  if (slash == std::string::npos || equals == std::string::npos || slash == 0 || equals == slash + 1)
    return std::nullopt;
  model::AddonQuantityChange change;
  change.organization = text.substr(0, slash);
  change.addonId = text.substr(slash + 1, equals - slash - 1);
  try {
    std::size_t used = 0;
    const std::string quantity = text.substr(equals + 1);
    change.quantity = std::stoll(quantity, &used);
    if (used != quantity.size() || change.quantity < 0) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return change;
}

// "node=mode"
std::optional<model::NodeModeChange> parseNodeModeChange(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) return std::nullopt;
  model::NodeModeChange change;
  change.node = text.substr(0, equals);
  change.expectedMode = model::parseNodeMode(text.substr(equals + 1));
  if (change.expectedMode == model::NodeMode::Unknown || change.expectedMode == model::NodeMode::Unset)
    return std::nullopt;
  return change;
}

int badInput(const std::string& message) {
  std::cerr << "tallyctl plan: " << message << '\n';
  return kExitBadInput;
}

}  // namespace

int runPlan(const PlanOptions& options) {
  const int changes = !options.recordFile.empty() + !options.addon.empty() + !options.nodeMode.empty();
  if (changes != 1) return badInput("give exactly one of --record, --addon, --node-mode");

  std::optional<model::Change> change;
  std::string recordText;
  if (!options.recordFile.empty()) {
    std::ifstream in(options.recordFile, std::ios::binary);
    if (!in) return badInput("record " + options.recordFile + ": cannot be opened");
    std::ostringstream text;
    text << in.rdbuf();
    recordText = text.str();
    codec::ParsedRecord parsed = codec::decodeReservationRecord(recordText, options.recordFile);
    if (!parsed.record) {
      for (const auto& problem : parsed.invalid.problems) {
        std::cout << "refused: " << model::toString(problem.code) << ": " << problem.message << '\n';
      }
      return kExitCheckFailed;
    }
    change = model::AddRecordChange{*parsed.record};
  } else if (!options.addon.empty()) {
    auto addon = parseAddonChange(options.addon);
    if (!addon) return badInput("--addon \"" + options.addon + "\": want <organization>/<add-on>=<quantity>");
    change = *addon;
  } else {
    auto mode = parseNodeModeChange(options.nodeMode);
    if (!mode) return badInput("--node-mode \"" + options.nodeMode + "\": want <node>=<mode>");
    change = *mode;
  }

  auto snapshot = loadInputs(options.input);
  if (!snapshot) return badInput(snapshot.error().describe());
  printSkipped(*snapshot);

  const model::PlanResult plan = model::plan(snapshot->cluster, *change);
  std::cout << (options.output == "json" ? planJson(plan) : planText(plan));
  if (plan.decision.allowed() && !recordText.empty() && options.output != "json") {
    std::cout << "\nthe record may be committed to the ledger as it is:\n---\n" << recordText;
  }
  return plan.decision.allowed() ? kExitOk : kExitCheckFailed;
}

}  // namespace tally::cli
